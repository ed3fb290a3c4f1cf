"""Try runs on the job queue: the `kernelwiki.try` task, run by GPU workers behind every verification job.

Queues `try-<target>` (a program, on a worker of its first target) and `try-any` (builds only, any worker),
each job deferred with `TRY_PRIORITY`, below every verification job (priority 0 or 1, app/scheduler.py).
procrastinate's fetch takes the waiting job of highest priority over all the queues a worker serves, so a
worker that has a verification job waiting never starts a try run: GPU time is never taken from nightly
verification. (A try run already started is not interrupted; it holds the GPU for its timeout at most,
`Settings.try_max_timeout_s`.)

The worker runs the unit with `app.tryrun.work.execute.execute`, the same runner verify path as everywhere, with a
cache and artifact folder of its own (`Settings.try_dir`), and posts its progress and result to the service
(`POST /api/try/{id}/events`, runner token), which stores them as the try result.

This module must not import app.queue (which registers the task from here).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("kernelwiki.worker")

TRY = "kernelwiki.try"
"""The task name of a try run."""
TRY_PRIORITY = -100
"""Priority of every try job: below the verification jobs' 0 and 1, so they are always fetched first."""
TRY_QUEUE_PREFIX = "try-"
ANY = "any"


def try_queue(target: str) -> str:
    """`try-sm_90a`; `try-any` for units that only build."""
    return TRY_QUEUE_PREFIX + (target or ANY)


def try_queues(targets: list[str]) -> list[str]:
    """The try queues a GPU worker of `targets` serves (after, in priority, every verification job)."""
    return [try_queue(t) for t in targets] + [try_queue(ANY)]


def register_try_task(app: Any) -> None:
    """Add the `kernelwiki.try` task to a procrastinate App (app.queue.build_app calls this)."""

    @app.task(name=TRY, queue=try_queue(ANY), pass_context=True)
    def try_run(context: Any, **job: Any) -> str:
        runtime = context.additional_context.get("try_runtime")
        if runtime is None:
            raise RuntimeError(f"{TRY} runs on GPU workers (kernelwiki worker --target …)")
        return str(runtime.handle(job))


PostFn = Callable[[str, dict[str, Any]], None]
"""post(try_id, {"event": …, "data": …} or {"event": "done", "result": …}) to the service."""


@dataclass
class TryRuntime:
    """What a GPU worker's try jobs run with: the runner's tools and a way to report to the service."""

    post: PostFn
    toolchain: Any  # runner.toolchain.Toolchain (None: discovered at the first job)
    gpus: list[Any] | None  # this worker's GPUs (None: discovered by the runner)
    isolation: str | None
    work_dir: Path  # the try runs' own runner cache and artifacts

    def handle(self, job: dict[str, Any]) -> str:
        """Run one try unit and post its events and result; never raises for the unit's own failure."""
        from app.tryrun.work.execute import execute
        from app.tryrun.work.unit import Unit
        from snippets.snippet import Snippet

        try_id = str(job["try_id"])
        unit = Unit(
            snippet=Snippet.from_dict(job["snippet"]),  # re-checked and re-hashed by the runner (runner.verify.rechecked)
            targets=[str(t) for t in job["targets"]],
            attributes=str(job.get("attributes", "")),
            snippet_id=job.get("snippet_id"),
            warnings=[str(w) for w in job.get("warnings", [])],
        )
        if self.toolchain is None:
            from runner.toolchain import discover_toolchain

            self.toolchain = discover_toolchain()
        result = execute(
            unit,
            try_id,
            compile_only=job.get("compile_only"),
            toolchain=self.toolchain,
            gpus=self.gpus,
            isolation=self.isolation,
            work_dir=self.work_dir,
            executor="queue",
            on_event=lambda name, data: self.post(try_id, {"event": name, "data": data}),
        )
        self.post(try_id, {"event": "done", "result": result})
        return f"try {try_id}: {result['status']}"


def http_post(server_url: str, token: str, timeout_s: float) -> PostFn:
    """Post to the service's `POST /api/try/{id}/events` with the runner token."""
    import httpx

    def post(try_id: str, body: dict[str, Any]) -> None:
        with httpx.Client(base_url=server_url, timeout=timeout_s) as http:
            response = http.post(f"/api/try/{try_id}/events", json=body, headers={"Authorization": f"Bearer {token}"})
        if response.status_code >= 400:
            raise RuntimeError(
                f"the service refused try run {try_id}'s {body.get('event')}: {response.status_code} {response.text[:300]}"
            )

    return post


def try_runtime_for(settings: Any, token: str, gpus: list[Any] | None, toolchain: Any) -> TryRuntime:
    """The try runtime of a GPU worker: its GPUs and toolchain (None: discovered), the service it reports to."""
    return TryRuntime(
        post=http_post(settings.server_url, token, settings.worker_http_timeout_s),
        toolchain=toolchain,
        gpus=gpus,
        isolation=settings.isolation,
        work_dir=Path(settings.try_dir),
    )
