"""A KernelWiki repository's fields as tables: facets (techniques, hardware_features, kernel_types, …) and
performance claims (app/index/facets.py, app/index/perf.py).

Revision ID: 0007r
Revises: 0006l
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007r"
down_revision = "0006l"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "facet",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("page_id", sa.String(), nullable=False),
        sa.Column("facet", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=False),
    )
    op.create_index("ix_facet_page_id", "facet", ["page_id"])
    op.create_index("ix_facet_name_value", "facet", ["facet", "value", "page_id"])
    op.create_table(
        "performance_claim",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("page_id", sa.String(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.String(), nullable=True),
        sa.Column("dtype", sa.String(), nullable=True),
        sa.Column("shape", sa.String(), nullable=True),
        sa.Column("metric", sa.String(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("utilization", sa.String(), nullable=True),
        sa.Column("source_id", sa.String(), nullable=True),
        sa.Column("source_locator", sa.String(), nullable=True),
        sa.Column("data", sa.String(), nullable=False),
    )
    op.create_index("ix_performance_claim_page_id", "performance_claim", ["page_id"])
    op.create_index("ix_performance_claim_gpu", "performance_claim", ["gpu"])
    op.create_index("ix_performance_claim_metric", "performance_claim", ["metric"])


def downgrade() -> None:
    op.drop_table("performance_claim")
    op.drop_table("facet")
