"""A page's id lowercased, indexed: `/a/NAME` and resolve find `pr-TensorRT-LLM-10042` asked in any case.

Ids may hold capitals (KernelWiki's PR pages); resolve compared the lowercased name with the id as written. Existing rows
are filled here; the rows version that came with this revision makes the next reindex write them anew anyway.

Revision ID: 0016i
Revises: 0015a
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016i"
down_revision = "0015a"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("page", sa.Column("id_lower", sa.String(), nullable=True))
    op.execute("UPDATE page SET id_lower = lower(id)")
    op.create_index("ix_page_id_lower", "page", ["id_lower"])


def downgrade() -> None:
    op.drop_index("ix_page_id_lower", table_name="page")
    op.drop_column("page", "id_lower")
