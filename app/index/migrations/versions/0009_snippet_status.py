"""Snippet statuses stored with the snippets: a `status` column and a row per snippet × target.

Listings (the home page's counts, `/evidence`, `/api/snippets?status=`) used to apply the
status rules to every snippet and evidence row on the first request after a change; the
statuses are now written where evidence is stored and where the wiki is indexed
(app/evidence/store.py `EvidenceStore.refresh_statuses`), and read in SQL. Existing
snippets get NULL, judged once when the service or the CLI next creates the schema
(`app.evidence.status.judge_missing`).

Revision ID: 0009s
Revises: 0008e
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009s"
down_revision = "0008e"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("snippet", sa.Column("status", sa.String(), nullable=True))
    op.create_index("ix_snippet_status", "snippet", ["status"])
    op.create_table(
        "snippet_target",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("snippet_id", sa.String(), nullable=False),
        sa.Column("page_id", sa.String(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("target_order", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("status_rank", sa.Integer(), nullable=False),
    )
    op.create_index("ix_snippet_target_snippet_id", "snippet_target", ["snippet_id"])
    op.create_index("ix_snippet_target_page_id", "snippet_target", ["page_id"])
    op.create_index("ix_snippet_target_target", "snippet_target", ["target"])
    op.create_index(
        "ix_snippet_target_listing", "snippet_target", ["status_rank", "page_id", "position", "target_order", "target"]
    )


def downgrade() -> None:
    op.drop_table("snippet_target")
    op.drop_index("ix_snippet_status", table_name="snippet")
    op.drop_column("snippet", "status")
