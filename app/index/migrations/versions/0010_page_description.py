"""A page's one-line description, worked out when it is indexed (app.index.markdown.description).

`/llms.txt` lists every page with it; it used to parse every page's body on the first
request after a start or a reindex. Pages indexed before this revision keep NULL until
they are next reindexed; llms.txt works theirs out on the fly meanwhile.

Revision ID: 0010d
Revises: 0009s
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010d"
down_revision = "0009s"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("page", sa.Column("description", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("page", "description")
