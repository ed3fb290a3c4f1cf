"""`run_gpu`: which GPUs ran a program that passed, per architecture family (app/index/run_gpus.py).

`/llms.txt` and the home page said that programs ran on an NVIDIA H200 whatever the evidence held; they now
say what it shows. The facts are kept in this small table as records are stored (app/evidence/store.py), so
no request scans the evidence. This migration fills it from the evidence already stored: one pass over the
records whose step is `run` and status `pass`.

Revision ID: 0017r
Revises: 0016i
Create Date: 2026-12-04
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from app.index.run_gpus import ran_pairs

revision = "0017r"
down_revision = "0016i"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_gpu = op.create_table(
        "run_gpu",
        sa.Column("family", sa.String(), primary_key=True),
        sa.Column("gpu_name", sa.String(), primary_key=True),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT step, status, target, data FROM evidence WHERE step = 'run' AND status = 'pass'"))
    records = []
    for step, status, target, data in rows:
        try:
            record = json.loads(data)
        except ValueError:
            continue
        if isinstance(record, dict):
            gpu, cc = record.get("gpu_name"), record.get("compute_capability")
            records.append((step, status, target, gpu if isinstance(gpu, str) else None, cc if isinstance(cc, str) else None))
    pairs = sorted(ran_pairs(records))
    if pairs:
        op.bulk_insert(run_gpu, [{"family": f, "gpu_name": g} for f, g in pairs])


def downgrade() -> None:
    op.drop_table("run_gpu")
