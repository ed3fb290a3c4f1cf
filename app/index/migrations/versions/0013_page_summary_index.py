"""A covering index of what `/llms.txt` lists of every page: id, type, title, description.

On SQLite `description` is the last column of a long row (body and html come before it, in overflow pages),
so `SELECT id, title, type, description FROM page` walked every page's overflow chain: ~40 of the ~120 ms of
CPU the first `/llms.txt` after a start or a reindex took at 10,000 pages. With this index the scan reads
the index alone (57 -> 19 ms for the query). On PostgreSQL the long values are TOASTed and the heap scan was
already cheap; the index costs little there (one short entry per page).

Revision ID: 0013v
Revises: 0012m
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0013v"
down_revision = "0012m"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_page_summary", "page", ["id", "type", "title", "description"])


def downgrade() -> None:
    op.drop_index("ix_page_summary", table_name="page")
