"""Try results in the database: one row per content key, its progress events and its finished record.

Whoever runs the unit (the local pool's thread, or the service on behalf of a queue worker) appends events
(`compiling`, `running`) and finally `done` with the record; a request's event stream reads them back
(app/tryrun/stream.py), so it works the same whichever process or machine did the work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, inspect, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from app.index.models import TryResultRow
from app.tryrun.tokens import Caller, now_iso
from app.tryrun.work.unit import Unit

ABANDONED_AFTER_S = 900
"""A try run with no progress for this long is taken as lost (its process ended): the same content asked again
runs again, and a stream waiting on it ends with an error. (Not one still waiting in the job queue.)"""

STATES = ("queued", "compiling", "running", "done")
_TABLE = inspect(TryResultRow).local_table


def parse_iso(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Claim:
    """What `claim` found or made for a key: the row, and whether this request must run it (False: stored or running)."""

    row: TryResultRow
    fresh: bool


def _row(mapping: Any) -> TryResultRow:
    return TryResultRow.model_validate(dict(mapping))


class TryResults:
    """The `try_result` table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, try_id: str) -> TryResultRow | None:
        with self.engine.connect() as conn:
            found = conn.execute(select(_TABLE).where(col(TryResultRow.id) == try_id)).first()
        return _row(found._mapping) if found is not None else None

    def by_key(self, key: str) -> TryResultRow | None:
        with self.engine.connect() as conn:
            found = conn.execute(select(_TABLE).where(col(TryResultRow.key) == key)).first()
        return _row(found._mapping) if found is not None else None

    @staticmethod
    def reusable(row: TryResultRow, now: datetime | None = None) -> bool:
        """May a request for the same content be answered by `row`: done and final, waiting in the job queue (which
        keeps it, and retries it when its worker dies), or still making progress?"""
        if row.state == "done":
            return row.final
        if row.executor == "queue" and row.state == "queued":
            return True
        return (now or datetime.now(UTC)) - parse_iso(row.updated_at) < timedelta(seconds=ABANDONED_AFTER_S)

    def claim(self, key: str, unit: Unit, caller: Caller, executor: str, compile_only: bool, reserve_gpu_s: float) -> Claim:
        """The row of `key`: the stored or running one when it may answer, else a new (or renewed) queued row that
        this request runs and is charged for."""
        now = now_iso()
        values = {
            "state": "queued",
            "status": None,
            "final": True,
            "token_name": caller.name,
            "snippet_id": unit.snippet_id,
            "lang": unit.snippet.lang,
            "targets": json.dumps(unit.targets),
            "attributes": unit.attributes,
            "source": unit.snippet.full_source,
            "executor": executor,
            "compile_only": compile_only,
            "gpu_seconds": reserve_gpu_s,  # reserved now, the seconds really used once done
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
            "events": json.dumps([{"event": "queued", "at": now}]),
            "result": None,
        }
        for _ in range(3):  # two requests for new content at once: one inserts, the other reads its row
            existing = self.by_key(key)
            if existing is not None and self.reusable(existing):
                return Claim(existing, fresh=False)
            try:
                with self.engine.begin() as conn:
                    if existing is None:
                        conn.execute(insert(TryResultRow).values(id=key[:24], key=key, **values))
                    else:  # lost or failed for a fault: run it again, as a new run of this caller
                        done = conn.execute(
                            update(TryResultRow)
                            .where(col(TryResultRow.key) == key, col(TryResultRow.updated_at) == existing.updated_at)
                            .values(**values)
                        )
                        if not done.rowcount:
                            continue
            except IntegrityError:
                continue
            row = self.by_key(key)
            assert row is not None
            return Claim(row, fresh=True)
        raise RuntimeError(f"try result {key[:24]}: could not be claimed")

    def _append(self, try_id: str, event: dict[str, Any], **values: Any) -> None:
        """Append `event` to the row's events and set `values`, in one transaction (nothing when the row is gone)."""
        now = now_iso()
        with self.engine.begin() as conn:
            found = conn.execute(select(col(TryResultRow.events)).where(col(TryResultRow.id) == try_id)).first()
            if found is None:
                return
            events = [*json.loads(found[0]), {**event, "at": now}]
            values = {k: (now if v is _NOW else v) for k, v in values.items()}
            conn.execute(
                update(TryResultRow)
                .where(col(TryResultRow.id) == try_id)
                .values(events=json.dumps(events), updated_at=now, **values)
            )

    def add_event(self, try_id: str, event: str, data: dict[str, Any] | None = None) -> None:
        """Append a progress event (compiling, running) and move the row's state to it."""
        self._append(try_id, {"event": event, **(data or {})}, state=event if event in STATES else "queued")

    def finish(self, try_id: str, result: dict[str, Any]) -> None:
        """Store the finished record: state `done`, its status, the GPU seconds it really used."""
        self._append(
            try_id,
            {"event": "done", "status": result["status"]},
            state="done",
            status=result["status"],
            final=result.get("fault") is None,
            gpu_seconds=float(result.get("gpu_seconds") or 0),
            result=json.dumps(result, ensure_ascii=False),
            finished_at=_NOW,
        )


_NOW = object()
"""A value of `_append` that stands for the transaction's time."""
