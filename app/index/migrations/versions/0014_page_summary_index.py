"""A covering index of what `/llms.txt` lists of every page: id, type, title, description.

On SQLite `description` is the last column of a long row (the body came before it, in overflow pages, and the
rendered HTML until 0013h), so `SELECT id, title, type, description FROM page` walked every page's overflow chain: ~40 of the ~120 ms of
CPU the first `/llms.txt` after a start or a reindex took at 10,000 pages. With this index the scan reads
the index alone (57 -> 19 ms for the query). On PostgreSQL the long values are TOASTed and the heap scan was
already cheap; the index costs little there (one short entry per page).

Revision ID: 0014v
Revises: 0013h
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0014v"
down_revision = "0013h"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_page_summary", "page", ["id", "type", "title", "description"])


def downgrade() -> None:
    op.drop_index("ix_page_summary", table_name="page")
