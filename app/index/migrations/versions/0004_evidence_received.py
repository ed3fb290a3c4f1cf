"""Evidence keeps when the service received each record and where it came from; timestamps in one sortable form.

Timestamps were compared as the text a runner sent, so `zzzz-not-a-date` stayed
"newest" forever. They are now stored in one fixed-width UTC form
(`2026-12-02T11:01:43.000000Z`, app/evidence/ingest.py), where text order is
time order; stored values are rewritten to it, and one that is not a time at
all becomes the oldest possible time, so it can never win over a real record.

Revision ID: 0004e
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004e"
down_revision = "0003"
branch_labels = None
depends_on = None

OLDEST = "0001-01-01T00:00:00.000000Z"


def _canonical(value: str) -> str:
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except (ValueError, AttributeError):
        return OLDEST
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def upgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.add_column(sa.Column("received_at", sa.String(), nullable=True))
        batch.add_column(sa.Column("origin", sa.String(), nullable=True))
        batch.create_index("ix_evidence_origin", ["origin"])
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT record_id, timestamp FROM evidence")).all()
    changed = [{"rid": rid, "ts": _canonical(ts)} for rid, ts in rows if _canonical(ts) != ts]
    if changed:
        bind.execute(sa.text("UPDATE evidence SET timestamp = :ts WHERE record_id = :rid"), changed)


def downgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.drop_index("ix_evidence_origin")
        batch.drop_column("origin")
        batch.drop_column("received_at")
