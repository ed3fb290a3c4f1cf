"""The toolchain × target matrix in SQL (issue 24): one row per snippet × target × CUDA release.

The matrix used to be read from `evidence/matrix/cells.jsonl` by every process that served it;
it is now loaded into `matrix_cell` where evidence is loaded (`kernelwiki index`, the service's
start) and written by queue workers' matrix jobs, and the views read SQL. An index migrated to
this revision gets the cells when the evidence folder is next loaded.

`evidence.toolchain_release` marks a record made with an explicitly chosen CUDA release
(`verify --toolchain 13.1`, a worker's KERNELWIKI_TOOLCHAIN): such a record never replaces
the default toolchain's as a snippet's current evidence (app/evidence/ingest.py `current_rank`).
Existing records get NULL: the default toolchain's.

Revision ID: 0012m
Revises: 0011t
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012m"
down_revision = "0011t"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "matrix_cell",
        sa.Column("snippet_id", sa.String(), primary_key=True),
        sa.Column("target", sa.String(), primary_key=True),
        sa.Column("release", sa.String(), primary_key=True),
        sa.Column("page_id", sa.String(), nullable=False),
        sa.Column("toolchain", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=True),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("lang", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("registers", sa.Integer(), nullable=True),
        sa.Column("smem_bytes", sa.Integer(), nullable=True),
        sa.Column("spill_bytes", sa.Integer(), nullable=True),
        sa.Column("warnings", sa.String(), nullable=False),
        sa.Column("sass_check", sa.String(), nullable=True),
        sa.Column("resources", sa.String(), nullable=False),
        sa.Column("sass", sa.String(), nullable=True),
        sa.Column("ptx", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=False),
        sa.Column("timestamp", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
    )
    op.create_index("ix_matrix_cell_page_id", "matrix_cell", ["page_id"])
    op.add_column("evidence", sa.Column("toolchain_release", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("evidence", "toolchain_release")
    op.drop_index("ix_matrix_cell_page_id", table_name="matrix_cell")
    op.drop_table("matrix_cell")
