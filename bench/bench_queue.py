"""Job-queue throughput: 10,000 no-op verification jobs through PostgreSQL with two workers (issue: scale-out).

    .venv/bin/python bench/bench_queue.py --jobs 10000 --workers 2

Two worker processes run the production worker loop (`app.queue.worker`: procrastinate,
heartbeats, stalled-job recovery, finished jobs deleted) with a runtime whose
verification does nothing. With both workers idle and listening, the jobs are
deferred the way the scheduler defers them (batches of 500, one queueing lock
each) and the clock runs until the last one is finished. The same no-op work
done in-process (the job handler called in a loop) is the baseline: the
difference per job is what the queue costs. Needs the PostgreSQL server of
KERNELWIKI_TEST_PG (a scratch database is created and dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PG_ADMIN = os.environ.get("KERNELWIKI_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
TARGET = "sm_90a"
PROCESS_TIMEOUT_S = 30


class NoopRuntime:
    """A GPU worker's runtime whose verification does nothing."""

    def handle(self, job_id: int, attempts: int, job: dict[str, Any]) -> str:
        return "noop"


def job_kwargs(i: int) -> dict[str, Any]:
    """The arguments of a real verification job, with a small snippet."""
    return {
        "snippet_id": f"bench-{i // 4}:{i % 4 + 1}",
        "target": TARGET,
        "content_hash": f"{i:064x}",
        "verified": [],
        "force": False,
        "queued_at": "2026-01-01T00:00:00+00:00",
        "snippet": {"id": f"bench-{i // 4}:{i % 4 + 1}", "lang": "cuda", "full_source": "__global__ void k() {}\n"},
    }


def settings_for(queue_url: str):  # type: ignore[no-untyped-def]
    from app.settings import Settings

    return Settings(queue_database_url=queue_url, targets=[TARGET])


def run_worker(queue_url: str, name: str) -> None:
    """Worker process: the production serve loop with the no-op runtime."""
    from app.queue.tasks import ANY_QUEUE, build_app
    from app.queue.worker import _serve

    settings = settings_for(queue_url)
    app = build_app(settings)
    queues = [TARGET, ANY_QUEUE]
    asyncio.run(_serve(app, settings, queues, {"runtime": NoopRuntime()}, name, queues))


def in_process(n: int) -> float:
    """Seconds to do the same n no-op jobs in-process: build the arguments, call the handler."""
    runtime = NoopRuntime()
    started = time.perf_counter()
    for i in range(n):
        runtime.handle(i, 0, job_kwargs(i))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker", nargs=2, metavar=("QUEUE_URL", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(*args.worker)
        return

    import psycopg
    from procrastinate import jobs as pjobs
    from sqlalchemy import create_engine, text

    from app.queue.tasks import VERIFY, build_app, ensure_schema, lock_of

    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    name = f"kw_benchq_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    queue_url = PG_ADMIN.replace("+psycopg", "").rsplit("/", 1)[0] + "/" + name
    procs: list[subprocess.Popen] = []
    try:
        ensure_schema(settings_for(queue_url))
        app = build_app(settings_for(queue_url))
        app.open()
        for k in range(args.workers):
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", queue_url, f"bench-{k}"],
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        with psycopg.connect(queue_url, autocommit=True) as conn:

            def count(sql: str) -> int:
                return conn.execute(sql).fetchone()[0]  # type: ignore[index]

            deadline = time.monotonic() + 60
            while count("SELECT count(*) FROM procrastinate_workers") < args.workers:
                if time.monotonic() > deadline:
                    raise RuntimeError("the workers did not start")
                time.sleep(0.1)
            jobs = [
                pjobs.Job(
                    id=None,
                    queue=TARGET,
                    task_name=VERIFY,
                    lock=None,
                    queueing_lock=lock_of(kw["snippet_id"], TARGET),
                    task_kwargs=kw,
                )
                for kw in (job_kwargs(i) for i in range(args.jobs))
            ]
            started = time.perf_counter()
            for i in range(0, len(jobs), 500):
                app.job_manager.batch_defer_jobs(jobs[i : i + 500])
            enqueued = time.perf_counter() - started
            while count(f"SELECT count(*) FROM procrastinate_jobs WHERE task_name = '{VERIFY}'") > 0:
                time.sleep(0.05)
            total = time.perf_counter() - started
            failed = count("SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")
        app.close()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=PROCESS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    base = in_process(args.jobs)
    per_job_ms = total / args.jobs * 1000
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "workers": args.workers,
                "enqueue_s": round(enqueued, 2),
                "enqueue_jobs_per_s": round(args.jobs / enqueued, 1),
                "enqueue_and_complete_s": round(total, 2),
                "jobs_per_s": round(args.jobs / total, 1),
                "wall_ms_per_job": round(per_job_ms, 3),
                "worker_ms_per_job": round(per_job_ms * args.workers, 3),
                "in_process_s": round(base, 4),
                "in_process_us_per_job": round(base / args.jobs * 1e6, 2),
                "queue_overhead_ms_per_job": round(per_job_ms - base / args.jobs * 1000, 3),
                "failed_jobs": failed,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
