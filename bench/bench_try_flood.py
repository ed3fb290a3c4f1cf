"""Try runs never take GPU time from verification: a flood of try jobs against a worker that also has verification jobs.

    .venv/bin/python bench/bench_try_flood.py --tries 200 --verifications 20 --hold-ms 200

One worker process runs the production loop (`app.worker._serve`: procrastinate, heartbeats, recovery) on the
queues a GPU worker of sm_90a serves (`sm_90a`, `any`, `try-sm_90a`, `try-any`), with runtimes that hold "the GPU"
for `--hold-ms` per job (a sleep: the scheduling is measured, not nvcc) and log when each job started and ended.
Try jobs are deferred by the service's own code (`app.tryrun.queue_dispatch.QueueDispatcher`, priority -100),
verification jobs as the scheduler defers them (priority 0/1). Three runs on a fresh PostgreSQL database each:

- baseline: the verification jobs alone;
- flood first: `--tries` try jobs deferred, the worker busy with them, then the verification jobs;
- arriving: the verification jobs deferred one at a time, every `--hold-ms`, into the running flood.

For each: when the last verification job ended (from the first one's deferral), each one's wait from deferral to
start, how many try jobs started while a verification job was waiting (0 if priority holds), and how many started
in idle gaps between the first deferral and the last end. Needs the PostgreSQL server of KERNELWIKI_TEST_PG.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
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


class Holder:
    """A runtime that holds the GPU for `hold_s` and logs (kind, id, start, end) as a JSON line."""

    def __init__(self, kind: str, hold_s: float, log: Path) -> None:
        self.kind, self.hold_s, self.log = kind, hold_s, log

    def handle(self, *args: Any) -> str:
        job = args[-1] if self.kind == "verify" else args[0]
        started = time.time()
        time.sleep(self.hold_s)
        with self.log.open("a") as fh:
            fh.write(
                json.dumps(
                    {"kind": self.kind, "id": job.get("snippet_id") or job.get("try_id"), "start": started, "end": time.time()}
                )
                + "\n"
            )
        return "held"


def settings_for(queue_url: str):  # type: ignore[no-untyped-def]
    from app.settings import Settings

    return Settings(queue_database_url=queue_url, targets=[TARGET], db="sqlite:///:memory:")


def run_worker(queue_url: str, log: str, hold_ms: str) -> None:
    from app.queue.tasks import ANY_QUEUE, build_app
    from app.queue.worker import _serve
    from app.tryrun.work.jobs import try_queues

    settings = settings_for(queue_url)
    hold = float(hold_ms) / 1000
    context = {"runtime": Holder("verify", hold, Path(log)), "try_runtime": Holder("try", hold, Path(log))}
    queues = [TARGET, ANY_QUEUE, *try_queues([TARGET])]
    asyncio.run(_serve(build_app(settings), settings, queues, context, "bench-try", queues))


def verification_job(i: int, run: str):  # type: ignore[no-untyped-def]
    from procrastinate import jobs as pjobs

    from app.queue.tasks import VERIFY, lock_of

    sid = f"{run}-{i}:1"
    return pjobs.Job(
        id=None,
        queue=TARGET,
        task_name=VERIFY,
        lock=None,
        queueing_lock=lock_of(sid, TARGET),
        priority=i % 2,
        task_kwargs={"snippet_id": sid, "target": TARGET, "content_hash": f"{i:064x}", "verified": [], "force": False},
    )


def scenario(name: str, tries: int, verifications: int, hold_ms: int, arriving: bool) -> dict[str, Any]:
    import psycopg
    from sqlalchemy import create_engine, text

    from app.queue.tasks import build_app, ensure_schema
    from app.tryrun.queue_dispatch import QueueDispatcher
    from app.tryrun.work.unit import TryIn, build_unit

    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    db = f"kw_benchtry_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    queue_url = PG_ADMIN.replace("+psycopg", "").rsplit("/", 1)[0] + "/" + db
    log = Path(f"/tmp/{db}.jsonl")
    worker = None
    try:
        settings = settings_for(queue_url)
        ensure_schema(settings)
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", queue_url, str(log), str(hold_ms)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with psycopg.connect(queue_url, autocommit=True) as conn:
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0] < 1:  # type: ignore[index]
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker did not start")
                time.sleep(0.1)
            dispatcher = QueueDispatcher(settings)
            unit = build_unit(TryIn(source="int main() { return 0; }\n", lang="cuda", targets=[TARGET]), 65536, 4, 30)
            for i in range(tries):
                dispatcher.start(unit, f"{i:024x}", None)
            if tries:  # the worker is busy with the flood before any verification job exists
                while not log.exists():
                    time.sleep(0.01)
            app = build_app(settings)
            deferred: dict[str, float] = {}
            with app.open():
                for i in range(verifications):
                    job = verification_job(i, name)
                    app.job_manager.batch_defer_jobs([job])
                    deferred[job.task_kwargs["snippet_id"]] = time.time()  # committed: a worker may fetch it from now on
                    if arriving:
                        time.sleep(hold_ms / 1000)
            deadline = time.monotonic() + 600
            while True:
                done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
                if sum(1 for d in done if d["kind"] == "verify") == verifications:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the verification jobs did not finish")
                time.sleep(0.05)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=PROCESS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                worker.kill()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    verify = [d for d in done if d["kind"] == "verify"]
    first_deferred = min(deferred.values())
    last_end = max(d["end"] for d in verify)
    waits = [d["start"] - deferred[d["id"]] for d in verify]
    started = {d["id"]: d["start"] for d in verify}
    ahead = sum(
        1
        for d in done
        if d["kind"] == "try" and any(deferred[v] < d["start"] < started[v] for v in deferred)  # a verification job was waiting
    )
    while_waiting = sum(1 for d in done if d["kind"] == "try" and first_deferred <= d["start"] <= last_end)
    log.unlink(missing_ok=True)
    return {
        "scenario": name,
        "try_jobs": tries,
        "verification_jobs": verifications,
        "hold_ms": hold_ms,
        "verification_makespan_s": round(last_end - first_deferred, 3),
        "verification_wait_ms_median": round(statistics.median(waits) * 1000, 1),
        "verification_wait_ms_max": round(max(waits) * 1000, 1),
        "try_jobs_started_ahead_of_a_waiting_verification_job": ahead,
        "try_jobs_started_between_first_deferral_and_last_end": while_waiting,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=200)
    parser.add_argument("--verifications", type=int, default=20)
    parser.add_argument("--hold-ms", type=int, default=200)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(*args.worker)
        return
    results = [
        scenario("baseline", 0, args.verifications, args.hold_ms, arriving=False),
        scenario("flood-first", args.tries, args.verifications, args.hold_ms, arriving=False),
        scenario("arriving", args.tries, args.verifications, args.hold_ms, arriving=True),
    ]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
