"""Try runs (issue 27): API tokens, stored hashed, and try results keyed by their content (app/tryrun/).

Revision ID: 0011t
Revises: 0010d
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011t"
down_revision = "0010d"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        sa.Column("compiles_per_hour", sa.Integer(), nullable=True),
        sa.Column("gpu_seconds_per_day", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("revoked_at", sa.String(), nullable=True),
    )
    op.create_table(
        "try_result",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("key", sa.String(), nullable=False, unique=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=True),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("token_name", sa.String(), nullable=True),
        sa.Column("snippet_id", sa.String(), nullable=True),
        sa.Column("lang", sa.String(), nullable=False),
        sa.Column("targets", sa.String(), nullable=False),
        sa.Column("attributes", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("executor", sa.String(), nullable=False),
        sa.Column("compile_only", sa.Boolean(), nullable=False),
        sa.Column("gpu_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("updated_at", sa.String(), nullable=False),
        sa.Column("finished_at", sa.String(), nullable=True),
        sa.Column("events", sa.String(), nullable=False),
        sa.Column("result", sa.String(), nullable=True),
    )
    op.create_index("ix_try_result_quota", "try_result", ["token_name", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_try_result_quota", table_name="try_result")
    op.drop_table("try_result")
    op.drop_table("api_token")
