"""The service's side of try runs on the job queue: deferring a unit behind every verification job.

The job carries the unit (the snippet as `Snippet.to_dict()`, its targets and why it is compile-only); the
GPU worker runs it (app/tryrun/work/jobs.py) and posts progress and result back through `POST /api/try/{id}/events`.
"""

from __future__ import annotations

import threading
from typing import Any

from app.settings import Settings
from app.tryrun.work.jobs import TRY, TRY_PRIORITY, try_queue
from app.tryrun.work.unit import Unit, with_id


class QueueDispatcher:
    """Try units into procrastinate's `try-*` queues, at `TRY_PRIORITY`."""

    kind = "queue"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._app: Any = None
        self._lock = threading.Lock()  # one App, opened for one defer at a time

    def tag(self) -> tuple[str, str]:
        """The toolchain the fleet's workers are set to (Settings.toolchain; 'fleet': whatever they have)."""
        return self.settings.toolchain or "fleet", "queue"

    def has_gpu(self) -> bool:
        return True  # a worker with no GPU for a target says so in the run step (skipped)

    def reserve(self) -> None:
        return None  # the queue holds any number; quotas bound each caller

    def release(self) -> None:
        return None

    def job(self, unit: Unit, try_id: str, compile_only: str | None) -> Any:
        """The procrastinate job of a unit: `try-<first target>` for a program to run, `try-any` otherwise."""
        from procrastinate import jobs as pjobs

        runs = unit.runs and compile_only is None
        return pjobs.Job(
            id=None,
            queue=try_queue(unit.targets[0] if runs else ""),
            task_name=TRY,
            lock=None,
            queueing_lock=f"try:{try_id}",
            priority=TRY_PRIORITY,
            task_kwargs={
                "try_id": try_id,
                "snippet": with_id(unit.snippet, try_id).to_dict(),
                "targets": list(unit.targets),
                "compile_only": compile_only,
                "attributes": unit.attributes,
                "snippet_id": unit.snippet_id,
                "warnings": list(unit.warnings),
            },
        )

    def start(self, unit: Unit, try_id: str, compile_only: str | None) -> None:
        from app.queue.tasks import build_app, ensure_schema

        with self._lock:
            if self._app is None:
                ensure_schema(self.settings)
                self._app = build_app(self.settings)
            with self._app.open():
                self._app.job_manager.batch_defer_jobs([self.job(unit, try_id, compile_only)])

    def close(self) -> None:
        return None
