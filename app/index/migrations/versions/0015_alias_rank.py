"""How a page holds each alias: its own (0), merged from data/aliases.yaml for a term it names (1), or for a term its id
names (2) (snippets/repository.py `Repository.aliases_for`). `/a/NAME` and resolve take the strongest holder of a name.

Existing rows read 0 until their pages are next parsed; the rows version that came with this revision
(app/index/page_rows.py `ROWS_VERSION`) makes the next reindex parse every page again.

Revision ID: 0015a
Revises: 0014v
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015a"
down_revision = "0014v"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("alias", sa.Column("rank", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("alias", "rank")
