"""The index schema: pages and their rows, evidence, and the search index of each backend.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

S = sa.String()


def _table(name: str, *columns: sa.Column, indexes: tuple[str, ...] = ()) -> None:
    op.create_table(name, *columns)
    for column in indexes:
        op.create_index(f"ix_{name}_{column}", name, [column])


def _page_child(name: str, *columns: sa.Column, indexes: tuple[str, ...]) -> None:
    _table(
        name,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("page_id", S, nullable=False),
        *columns,
        indexes=("page_id", *indexes),
    )


def upgrade() -> None:
    _table(
        "page",
        sa.Column("id", S, primary_key=True),
        sa.Column("title", S, nullable=False),
        sa.Column("type", S, nullable=False),
        sa.Column("path", S, nullable=False),
        sa.Column("confidence", S, nullable=True),
        sa.Column("evidence_level", S, nullable=True),
        sa.Column("meta", S, nullable=False),
        sa.Column("body", S, nullable=False),
        sa.Column("body_line", sa.Integer(), nullable=False),
        sa.Column("html", S, nullable=False),
        sa.Column("toc", S, nullable=False),
        sa.Column("content_hash", S, nullable=False),
        indexes=("type", "path", "confidence"),
    )
    _table(
        "file",
        sa.Column("path", S, primary_key=True),
        # Nanosecond mtimes and file sizes outgrow PostgreSQL's 32-bit INTEGER.
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content_hash", S, nullable=False),
        sa.Column("page_id", S, nullable=True),
        indexes=("page_id",),
    )
    _table(
        "diagnostic",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("path", S, nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("severity", S, nullable=False),
        sa.Column("message", S, nullable=False),
        indexes=("path",),
    )
    _page_child(
        "alias", sa.Column("alias", S, nullable=False), sa.Column("alias_lower", S, nullable=False), indexes=("alias_lower",)
    )
    _page_child("tag", sa.Column("tag", S, nullable=False), indexes=("tag",))
    _page_child("language", sa.Column("language", S, nullable=False), indexes=("language",))
    _page_child("architecture", sa.Column("arch", S, nullable=False), sa.Column("family", S, nullable=False), indexes=("family",))
    _table(
        "link",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("source_id", S, nullable=False),
        sa.Column("target_id", S, nullable=False),
        sa.Column("kind", S, nullable=False),
        sa.Column("resolved", sa.Boolean(), nullable=False),
        indexes=("source_id", "target_id"),
    )
    _page_child(
        "section",
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("heading", S, nullable=False),
        sa.Column("anchor", S, nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("text", S, nullable=False),
        indexes=(),
    )
    _table(
        "snippet",
        sa.Column("id", S, primary_key=True),
        sa.Column("page_id", S, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("lang", S, nullable=False),
        sa.Column("mode", S, nullable=False),
        sa.Column("targets", S, nullable=False),
        sa.Column("content_hash", S, nullable=False),
        sa.Column("data", S, nullable=False),
        indexes=("page_id", "lang", "content_hash"),
    )
    _table(
        "evidence",
        sa.Column("record_id", S, primary_key=True),
        sa.Column("snippet_id", S, nullable=False),
        sa.Column("page_id", S, nullable=False),
        sa.Column("target", S, nullable=False),
        sa.Column("step", S, nullable=False),
        sa.Column("status", S, nullable=False),
        sa.Column("content_hash", S, nullable=False),
        sa.Column("timestamp", S, nullable=False),
        sa.Column("data", S, nullable=False),
        indexes=("snippet_id", "page_id", "target", "status", "timestamp"),
    )
    if op.get_bind().dialect.name == "postgresql":
        _postgres_search()
    else:
        _sqlite_search()


def _sqlite_search() -> None:
    """FTS5 with bm25; '_' is a word character so cp_async_bulk stays one token (see app/search/)."""
    op.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5("
        "page_id UNINDEXED, section_id UNINDEXED, title, aliases, tags, heading, body, "
        "tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\", prefix = '2 3 4')"
    )
    op.execute("CREATE VIRTUAL TABLE IF NOT EXISTS search_vocab USING fts5vocab(search_fts, 'row')")


def _postgres_search() -> None:
    """A stored weighted tsvector per row with a GIN index; words with a trigram index (see app/search_pg.py)."""
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        "CREATE TABLE search_doc (page_id VARCHAR NOT NULL, section_id INTEGER NOT NULL, "
        "tsv TSVECTOR NOT NULL, PRIMARY KEY (page_id, section_id))"
    )
    op.execute("CREATE INDEX ix_search_doc_tsv ON search_doc USING gin (tsv)")
    op.execute("CREATE TABLE search_term (word VARCHAR PRIMARY KEY, docs INTEGER NOT NULL)")
    op.execute("CREATE INDEX ix_search_term_trgm ON search_term USING gist (word gist_trgm_ops)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE IF EXISTS search_term")
        op.execute("DROP TABLE IF EXISTS search_doc")
    else:
        op.execute("DROP TABLE IF EXISTS search_vocab")
        op.execute("DROP TABLE IF EXISTS search_fts")
    for name in (
        "evidence",
        "snippet",
        "section",
        "link",
        "architecture",
        "language",
        "tag",
        "alias",
        "diagnostic",
        "file",
        "page",
    ):
        op.drop_table(name)
