"""SQLite search rows get explicit rowids (section ids), so a page's rows are deleted by rowid.

The index is derived from the wiki folder, so this migration empties it (evidence
is kept) and the next reindex rebuilds it with the new rowids.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

DERIVED = ("alias", "tag", "language", "architecture", "link", "section", "snippet", "diagnostic", "page", "file")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DELETE FROM search_fts")
    for table in DERIVED:
        op.execute(f"DELETE FROM {table}")


def downgrade() -> None:
    """Nothing to undo: the rows are rebuilt by the next reindex either way."""
