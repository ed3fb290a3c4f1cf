"""Index-wide state (a generation counter that grows with every reindex that changed something),
and page titles in lowercase for resolution by title.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("page", sa.Column("title_lower", sa.String(), nullable=False, server_default=""))
    op.create_index("ix_page_title_lower", "page", ["title_lower"])
    op.execute("UPDATE page SET title_lower = lower(title)")
    op.create_table(
        "index_state",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("index_state")
    op.drop_index("ix_page_title_lower", "page")
    op.drop_column("page", "title_lower")
