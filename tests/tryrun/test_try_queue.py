"""Try runs through the PostgreSQL job queue: deferred below every verification job, run by a real procrastinate
worker with the real runner (bwrap + nvcc, compile-only here), reported back to the service over HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from procrastinate import jobs as pjobs
from sqlalchemy import text

from app.queue.tasks import ANY_QUEUE, VERIFY, build_app, ensure_schema
from app.tryrun.work.jobs import TRY_PRIORITY, TryRuntime, http_post, try_queue, try_queues
from runner.sandbox import ISOLATION_BWRAP, isolation_problem
from tests.conftest import LiveServer
from tests.tryrun.conftest import TryClient, events_of, try_settings

RUNNER_TOKEN = "test-runner-token"


@pytest.fixture
def queued(postgres_url: str, tmp_path: Path, wiki_dir: Path) -> Iterator[TryClient]:
    """The service on PostgreSQL (index and queue) with try runs on: they go to the queue (try_executor auto)."""
    from app.main import create_app

    settings = try_settings(tmp_path, wiki_dir, db=postgres_url, queue_database_url=postgres_url.replace("+psycopg", ""))
    app = create_app(settings)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=300) as http:
        yield TryClient(http, app)


class Recorder:
    """Stands in for the GPU worker's verification runtime, and wraps its try runtime: the order jobs ran in."""

    def __init__(self, order: list[str], inner: TryRuntime | None = None) -> None:
        self.order = order
        self.inner = inner

    def handle(self, *args: Any) -> str:
        if self.inner is None:  # a verification job: (job id, attempts, job)
            self.order.append(f"verify {args[2]['snippet_id']}")
            return "verified"
        self.order.append(f"try {args[0]['try_id']}")
        return self.inner.handle(args[0])


def verification_job(n: int) -> pjobs.Job:
    """A verification job as the scheduler defers it (app/scheduler.py: priority 0 or 1)."""
    return pjobs.Job(
        id=None,
        queue="sm_90a",
        task_name=VERIFY,
        lock=None,
        queueing_lock=f"page:{n}@sm_90a",
        priority=n % 2,
        task_kwargs={"snippet_id": f"page:{n}", "target": "sm_90a", "content_hash": "h", "verified": [], "force": False},
    )


def test_try_jobs_wait_behind_every_verification_job_and_report_back_through_the_service(
    queued: TryClient, tmp_path: Path
) -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        pytest.skip(f"bubblewrap unusable here: {problem}")
    settings = queued.service.settings
    token = queued.token("alice")
    answers: dict[int, httpx.Response] = {}

    def ask(n: int) -> None:
        with httpx.Client(base_url=str(queued.http.base_url), timeout=300) as http:
            body = {"source": f"print({n})\n", "lang": "python", "targets": ["any"]}
            answers[n] = http.post("/api/try", json=body, headers={"Authorization": f"Bearer {token}"})

    askers = [threading.Thread(target=ask, args=(n,)) for n in range(3)]
    for t in askers:
        t.start()
    deadline = time.monotonic() + 60
    while True:  # the try jobs are in the queue before any verification job
        with queued.service.engine.connect() as conn:
            rows = conn.execute(text("SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'kernelwiki.try'")).scalar()
        if rows == 3:
            break
        assert time.monotonic() < deadline, "the try jobs were not deferred"
        time.sleep(0.05)
    ensure_schema(settings)
    app = build_app(settings)
    with app.open():
        app.job_manager.batch_defer_jobs([verification_job(n) for n in range(4)])
        jobs = app.connector.get_sync_connector().execute_query_all(
            query="SELECT id, queue_name, task_name, priority FROM procrastinate_jobs ORDER BY id"
        )
    tries = [j for j in jobs if j["task_name"] == "kernelwiki.try"]
    mine = [j for j in jobs if j["task_name"] == VERIFY and j["id"] > max(t["id"] for t in tries)]
    assert [(j["queue_name"], j["priority"]) for j in tries] == [("try-any", TRY_PRIORITY)] * 3
    assert len(mine) == 4 and all(j["priority"] >= 0 for j in mine)  # deferred after the try jobs
    served = [j for j in jobs if j["task_name"] == VERIFY and j["queue_name"] == "sm_90a"]  # the reindex queued some too

    order: list[str] = []
    runtime = TryRuntime(
        post=http_post(str(queued.http.base_url), RUNNER_TOKEN, 60),
        toolchain=None,
        gpus=[],
        isolation=None,
        work_dir=tmp_path / "w",
    )
    context = {"runtime": Recorder(order), "try_runtime": Recorder(order, runtime)}

    async def work() -> None:
        async with app.open_async():
            await app.run_worker_async(
                queues=["sm_90a", ANY_QUEUE, *try_queues(["sm_90a"])], concurrency=1, wait=False, additional_context=context
            )

    asyncio.run(work())
    for t in askers:
        t.join(timeout=120)
    assert [o.split()[0] for o in order] == ["verify"] * len(served) + ["try"] * 3, order  # deferred last, fetched first
    for n, answer in answers.items():
        events = events_of(answer)
        assert [name for name, _ in events] == ["queued", "compiling", "done"], (n, answer.text)
        run = events[-1][1]["run"]
        assert run["executor"] == "queue" and run["result"]["executor"] == "queue"
        assert [(r["step"], r["status"]) for r in run["result"]["records"]] == [("compile", "syntax-ok")]
        assert run["result"]["isolation"] == "bwrap"
    # a worker's report needs the runner token; an API token cannot forge a result
    forged = queued.http.post(
        f"/api/try/{run['id']}/events", json={"event": "done", "result": {}}, headers={"Authorization": f"Bearer {token}"}
    )
    assert forged.status_code == 401
    deep = '{"event": "done", "result": ' + "[" * 5000 + "]" * 5000 + "}"
    nested = queued.http.post(f"/api/try/{run['id']}/events", content=deep, headers={"Authorization": f"Bearer {RUNNER_TOKEN}"})
    assert nested.status_code == 422 and "nested deeper than" in nested.text, nested.text
    with queued.service.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM evidence")).scalar() == 0


def test_a_program_goes_to_its_targets_try_queue_and_a_build_to_try_any(queued: TryClient) -> None:
    from app.tryrun.queue_dispatch import QueueDispatcher
    from app.tryrun.work.unit import TryIn, build_unit

    program = build_unit(TryIn(source="int main() { return 0; }\n", lang="cuda", targets=["sm_90a", "sm_100a"]), 65536, 4, 30)
    dispatcher = QueueDispatcher(queued.service.settings)
    assert dispatcher.job(program, "a" * 24, None).queue == try_queue("sm_90a") == "try-sm_90a"
    assert dispatcher.job(program, "a" * 24, "anonymous callers may only compile").queue == "try-any"
    assert dispatcher.job(program, "a" * 24, None).priority == TRY_PRIORITY < 0
