"""Full-text search moved to an in-memory tantivy index (app/search/): the SQL search tables go.

SQLite loses the FTS5 table `search_fts` and its `search_vocab` view; PostgreSQL
loses `search_doc` (tsvector, GIN) and `search_term` (pg_trgm). The tantivy index
is rebuilt from the page and section rows whenever a process starts, so nothing
is lost. Downgrading recreates the tables empty; the older code would then
need `kernelwiki index --force` to fill them.

Revision ID: 0005s
Revises: 0004e
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0005s"
down_revision = "0004e"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE IF EXISTS search_term")
        op.execute("DROP TABLE IF EXISTS search_doc")
    else:
        op.execute("DROP TABLE IF EXISTS search_vocab")
        op.execute("DROP TABLE IF EXISTS search_fts")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TABLE IF NOT EXISTS search_doc (page_id VARCHAR NOT NULL, section_id INTEGER NOT NULL, "
            "tsv TSVECTOR NOT NULL, PRIMARY KEY (page_id, section_id))"
        )
        op.execute("CREATE INDEX IF NOT EXISTS ix_search_doc_tsv ON search_doc USING gin (tsv)")
        op.execute("CREATE TABLE IF NOT EXISTS search_term (word VARCHAR PRIMARY KEY, docs INTEGER NOT NULL)")
        op.execute("CREATE INDEX IF NOT EXISTS ix_search_term_trgm ON search_term USING gist (word gist_trgm_ops)")
    else:
        op.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5("
            "page_id UNINDEXED, section_id UNINDEXED, title, aliases, tags, heading, body, "
            "tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\", prefix = '2 3 4')"
        )
        op.execute("CREATE VIRTUAL TABLE IF NOT EXISTS search_vocab USING fts5vocab(search_fts, 'row')")
