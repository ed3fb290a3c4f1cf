"""Pages no longer store their rendered HTML.

The web view renders a page with its own hooks (evidence slots, link targets, permalinks) and the page
API renders on request, so the `html` column was written for every page at every index and read by
nothing but the API: rendering it was 8% of a parse worker's CPU (profiled on the synthetic wiki of
bench/bench_index.py), and it was 32% of the text an index stores (7.0 of 21.8 MB at 2,000 pages).

Revision ID: 0013h
Revises: 0012m
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013h"
down_revision = "0012m"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("page") as batch:
        batch.drop_column("html")


def downgrade() -> None:
    with op.batch_alter_table("page") as batch:
        batch.add_column(sa.Column("html", sa.String(), nullable=False, server_default=""))
