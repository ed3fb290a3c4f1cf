"""The try-run service of one app: who is asking, whether their quota allows it, and where the unit runs.

`submit` answers a unit from the stored results when the same content (source, language, attributes,
targets, toolchain, where it runs) was tried before, joins a run of it that is still going, or admits a new
run: the caller's quota is checked (app/tryrun/quota.py) and the unit goes to the local pool
(app/tryrun/pool.py) or, where the index is PostgreSQL, to the job queue behind nightly verification
(app/tryrun/work/jobs.py).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from app.index.models import TryResultRow
from app.settings import Settings
from app.tryrun import quota
from app.tryrun.store import TryResults
from app.tryrun.tokens import ANONYMOUS, Caller, Refused, authenticate
from app.tryrun.work.unit import Unit

log = logging.getLogger("kernelwiki.try")

ANONYMOUS_COMPILE_ONLY = "anonymous callers may only compile (a token runs programs)"
NO_GPU = "no GPU on this server: built only, nothing was run"


class Dispatcher(Protocol):
    """Where admitted units go: the local pool or the job queue."""

    kind: str  # local | queue

    def tag(self) -> tuple[str, str]: ...  # (toolchain fingerprint, where it runs), part of the result key

    def has_gpu(self) -> bool: ...  # may programs run at all?

    def reserve(self) -> None: ...  # take a place (raises when there is none)

    def release(self) -> None: ...  # give back a place reserved but not used

    def start(self, unit: Unit, try_id: str, compile_only: str | None) -> None: ...

    def close(self) -> None: ...


class QuotaExceeded(Exception):
    def __init__(self, refusal: quota.Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


@dataclass
class Submitted:
    """What `submit` did: the row to stream, and whether it was answered from the store (or joined a running one)."""

    row: TryResultRow
    fresh: bool  # True: this request started the run (and was charged for it)


def queue_wanted(settings: Settings) -> bool:
    """Do try runs go through the job queue? `try_executor` queue, or auto with a PostgreSQL index or queue URL."""
    if settings.try_executor == "queue":
        return True
    if settings.try_executor == "local":
        return False
    return settings.queue_database_url is not None or settings.db.startswith("postgresql")


class TryService:
    """Tokens, quotas, stored results and the dispatcher, for one app."""

    def __init__(self, settings: Settings, engine: Engine, dispatcher: Dispatcher) -> None:
        self.settings = settings
        self.engine = engine
        self.results = TryResults(engine)
        self.dispatcher = dispatcher
        self._admit = threading.Lock()  # quota check and claim, one request at a time in this process

    def caller(self, authorization: str | None) -> Caller:
        """The caller an `Authorization` header stands for; Refused (401/403) for a bad token, or for none where
        the operator has not allowed anonymous compiles."""
        if not authorization:
            if self.settings.try_anonymous:
                return ANONYMOUS
            raise Refused(
                401, "Authorization: try runs need an API token (Authorization: Bearer TOKEN; `kernelwiki tokens create NAME`)"
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "Authorization: give the token as `Authorization: Bearer TOKEN`")
        return authenticate(self.engine, token.strip())

    def compile_only(self, unit: Unit, caller: Caller, why: str | None = None) -> str | None:
        """Why the unit's programs will not run (`why`: the caller asked only to compile), or None."""
        if not unit.runs:
            return None
        if why:
            return why
        if caller.anonymous:
            return ANONYMOUS_COMPILE_ONLY
        if not self.dispatcher.has_gpu():
            return NO_GPU
        return None

    def key(self, unit: Unit, compile_only: str | None) -> str:
        toolchain, where = self.dispatcher.tag()
        return unit.key(toolchain, f"{where}:{'compile-only' if compile_only else 'run'}")

    def submit(self, unit: Unit, caller: Caller, compile_only_why: str | None = None) -> Submitted:
        """Answer, join or admit `unit`; QuotaExceeded or the dispatcher's refusal (PoolFull) when it cannot start.
        `compile_only_why`: build only, even a program, and say so."""
        compile_only = self.compile_only(unit, caller, compile_only_why)
        key = self.key(unit, compile_only)
        existing = self.results.by_key(key)
        if existing is not None and self.results.reusable(existing):
            return Submitted(existing, fresh=False)
        reserve_gpu_s = float(unit.snippet.timeout * len(unit.targets)) if unit.runs and compile_only is None else 0.0
        with self._admit:
            with self.engine.connect() as conn:
                refusal = quota.check(conn, caller, self.settings, reserve_gpu_s)
            if refusal is not None:
                raise QuotaExceeded(refusal)
            self.dispatcher.reserve()
            try:
                claim = self.results.claim(key, unit, caller, self.dispatcher.kind, compile_only is not None, reserve_gpu_s)
            except BaseException:
                self.dispatcher.release()
                raise
        if not claim.fresh:
            self.dispatcher.release()
            return Submitted(claim.row, fresh=False)
        try:
            self.dispatcher.start(unit, claim.row.id, compile_only)
        except Exception as exc:  # noqa: BLE001 - the queue is away: the run ends as a fault (not final), said in `done`
            from app.tryrun.work.execute import result_record

            log.warning("try run %s could not be queued: %s", claim.row.id, exc)
            fault = result_record(
                unit,
                claim.row.id,
                [],
                toolchain={},
                gpus=[],
                isolation=None,
                compile_only=compile_only,
                listings={},
                duration_s=0.0,
                executor=self.dispatcher.kind,
                fault=f"could not be queued: {type(exc).__name__}: {exc}",
            )
            self.results.finish(claim.row.id, fault)
        return Submitted(claim.row, fresh=True)

    def close(self) -> None:
        self.dispatcher.close()
        self.engine.dispose()


def public_row(row: TryResultRow) -> dict[str, Any]:
    """`GET /api/try/{id}`: the try run as JSON (the finished record under `result`, null until it is done)."""
    import json

    return {
        "id": row.id,
        "state": row.state,
        "status": row.status,
        "lang": row.lang,
        "targets": json.loads(row.targets),
        "attributes": row.attributes,
        "source": row.source,
        "snippet_id": row.snippet_id,
        "executor": row.executor,
        "created_at": row.created_at,
        "finished_at": row.finished_at,
        "events": json.loads(row.events),
        "result": json.loads(row.result) if row.result else None,
        "url": f"/try/{row.id}",
    }
