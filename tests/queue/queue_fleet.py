"""Helpers of the queue tests: pages of snippets, waiting, and the fleet (service, settings, worker processes).

A module of its own (tests/queue has no __init__.py: a package named `queue` would shadow the standard library)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TOKEN = "queue-test-token"
PROCESS_TIMEOUT_S = 20

PAGE = """---
id: {id}
title: {title}
type: hardware
architectures: [{archs}]
tags: [queue]
---
# Code

{blocks}
"""

BLOCK = """```cuda compile arch={arch}
__global__ void k{n}(int *p) {{ p[0] = {n}; }}
{extra}
```
"""


def write_page(wiki: Path, page_id: str, blocks: list[tuple[str, str]]) -> None:
    """A page whose i-th code block declares targets `arch` and carries `extra` lines (fake-worker directives)."""
    text = "\n".join(BLOCK.format(arch=arch, n=i, extra=extra) for i, (arch, extra) in enumerate(blocks))
    archs = sorted({a.replace("_", "") for arch, _ in blocks for a in arch.split(",")})
    (wiki / f"{page_id}.md").write_text(PAGE.format(id=page_id, title=page_id.title(), archs=", ".join(archs), blocks=text))


def wait_for(predicate: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Fleet:
    """The service, its settings, and the worker processes a test started."""

    settings: Any
    url: str
    store: Any
    markers: Path
    logs: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    clients: list[Any] = field(default_factory=list)  # in-process EvidenceClients, closed by stop()

    def env(self, **extra: str) -> dict[str, str]:
        s = self.settings
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWIKI_")}
        env.update(
            {
                "KERNELWIKI_QUEUE_DATABASE_URL": s.queue_database_url.get_secret_value(),
                "KERNELWIKI_SERVER_URL": self.url,
                "KERNELWIKI_RUNNER_TOKEN": TOKEN,
                "KERNELWIKI_TARGETS": '["sm_90a", "sm_100a"]',
                "KERNELWIKI_STALLED_AFTER_S": str(s.stalled_after_s),
                "KERNELWIKI_WORKER_HEARTBEAT_S": str(s.worker_heartbeat_s),
                "KERNELWIKI_JOB_RETRY_WAIT_S": "1",
                "KW_TEST_MARKERS": str(self.markers),
                "PYTHONUNBUFFERED": "1",
                **extra,
            }
        )
        return env

    def start_worker(self, target: str, name: str, **extra_env: str) -> subprocess.Popen:
        with (self.logs / f"{name}.log").open("wb") as log:  # the worker writes to its own copy of the file
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "fake_worker.py"), target, name],
                cwd=REPO,
                env=self.env(**extra_env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def scheduler(self):  # type: ignore[no-untyped-def]
        """A Scheduler on an opened (synchronous) App; close it with `.app.close()`."""
        from app.queue.scheduler import Scheduler
        from app.queue.tasks import build_app, ensure_schema

        ensure_schema(self.settings)
        app = build_app(self.settings)
        app.open()
        return Scheduler(app, self.store, self.settings)

    def evidence(self) -> list[dict[str, Any]]:
        import json

        from sqlalchemy import select

        from app.index.models import EvidenceRow

        with self.store.engine.connect() as conn:
            return [json.loads(d) for (d,) in conn.execute(select(EvidenceRow.data))]

    def jobs(self) -> list[dict[str, Any]]:
        """Verification jobs in the queue (finished ones are deleted; control tasks are left out)."""
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.settings.queue_database_url.get_secret_value(), row_factory=dict_row) as conn:
            return conn.execute(
                "SELECT id, queue_name, status, attempts, queueing_lock, args->>'snippet_id' AS snippet_id, "
                "args->>'target' AS target FROM procrastinate_jobs WHERE task_name = 'kernelwiki.verify' ORDER BY id"
            ).fetchall()

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=PROCESS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=PROCESS_TIMEOUT_S)
