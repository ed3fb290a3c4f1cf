"""Indexes for listings that page in SQL: pages in (type, title, id) order, architecture facets.

`GET /api/pages` and the home page read one window `ORDER BY type, title, id
LIMIT … OFFSET …`; with this index SQLite and PostgreSQL walk the index instead
of sorting every page. The architecture facet counts pages per family from
(family, page_id) alone.

Revision ID: 0006l
Revises: 0005s
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0006l"
down_revision = "0005s"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_page_listing", "page", ["type", "title", "id"])
    op.create_index("ix_architecture_family_page", "architecture", ["family", "page_id"])


def downgrade() -> None:
    op.drop_index("ix_architecture_family_page", table_name="architecture")
    op.drop_index("ix_page_listing", table_name="page")
