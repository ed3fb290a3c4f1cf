"""Which stored try runs answer a request for the same content (app/tryrun/store.py), on real SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.index.db import create_schema, make_engine
from app.tryrun.store import ABANDONED_AFTER_S, TryResults
from app.tryrun.tokens import ANONYMOUS
from app.tryrun.work.unit import TryIn, build_unit


def test_a_run_without_progress_is_taken_as_lost_unless_it_waits_in_the_job_queue(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'index.db'}")
    create_schema(engine)
    results = TryResults(engine)
    unit = build_unit(TryIn(source="print(1)\n", lang="python", targets=["any"]), 65536, 4, 30)
    local = results.claim("a" * 64, unit, ANONYMOUS, "local", False, 0.0).row
    queued = results.claim("b" * 64, unit, ANONYMOUS, "queue", False, 0.0).row
    later = datetime.now(UTC) + timedelta(seconds=ABANDONED_AFTER_S + 1)
    assert results.reusable(local) and not results.reusable(local, later)  # its process is gone: run it again
    assert results.reusable(queued, later)  # the queue keeps it until a worker takes it
    results.add_event(queued.id, "compiling", {"target": "any"})
    started = results.get(queued.id)
    assert started is not None and started.state == "compiling" and not results.reusable(started, later)
    again = results.claim("a" * 64, unit, ANONYMOUS, "local", False, 0.0)
    assert again.fresh is False  # still within the window
    results.finish(local.id, {"status": "error", "fault": "SandboxUnavailable: no bwrap", "records": []})
    faulted = results.get(local.id)
    assert faulted is not None and faulted.state == "done" and not faulted.final and not results.reusable(faulted)
    renewed = results.claim("a" * 64, unit, ANONYMOUS, "local", False, 0.0)
    assert renewed.fresh is True and renewed.row.state == "queued" and renewed.row.id == local.id
    engine.dispose()
