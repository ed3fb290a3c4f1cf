"""An index for a snippet's evidence history, newest first, one window at a time.

`GET /api/snippets/{id}/evidence` (and the MCP tool) read `WHERE snippet_id = ?
AND (timestamp, record_id) < (?, ?) ORDER BY timestamp DESC, record_id DESC
LIMIT n`; with this index SQLite and PostgreSQL walk n entries instead of
sorting every record of the snippet.

Revision ID: 0008e
Revises: 0007r
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0008e"
down_revision = "0007r"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_evidence_history", "evidence", ["snippet_id", "timestamp", "record_id"])


def downgrade() -> None:
    op.drop_index("ix_evidence_history", table_name="evidence")
