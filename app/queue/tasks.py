"""The verification job queue: procrastinate on PostgreSQL, one queue per target.

Jobs:
- `kernelwiki.verify` (queue = the target, e.g. `sm_90a`; `any` for host-only
  blocks on pages without architectures): verify one snippet for one target on
  a GPU worker (app/queue/worker.py, app/queue/job.py) and post the evidence to the service. Its
  queueing lock `SNIPPET@TARGET` keeps one job per snippet × target queued.
  (No procrastinate `lock`: it costs an anti-join over the waiting jobs on
  every fetch, and the overlapping runs it would prevent, old and new content,
  or a stalled job retried while its worker still runs, are harmless since
  evidence record ids are fixed per job.)
- `kernelwiki.sweep` (periodic, `sweep_cron`, control queue): on edit, queue
  every snippet × target whose current content hash has no evidence and no job
  yet. It reads the index, so it finds edits whoever reindexed (the service at
  start, `kernelwiki index`, another replica); `enqueue_changed` queues a
  reindex's `changed_snippets` at once for callers that hold the report.
  Which pairs to queue, and deferring them, is app/queue/scheduler.py.
- `kernelwiki.nightly` (periodic, `nightly_cron`, control queue): fan out every
  snippet × target. Each job carries the toolchains that already verified that
  content; a worker whose toolchain is among them skips it unless forced. Beside
  it, the toolchain matrix, incrementally (app/queue/scheduler.py `enqueue_matrix`).
- `kernelwiki.matrix` (queue `matrix-RELEASE`, e.g. `matrix-13.1`): compile one
  snippet × target with one CUDA release, compile-only, on a CPU worker that holds
  that release (`kernelwiki worker --toolchains 13.0,13.1`, app/queue/matrix_job.py),
  and post the cells with their SASS/PTX (`POST /api/matrix/cells`). Queueing lock
  `matrix:SNIPPET@TARGET@RELEASE`. GPU runs stay on `kernelwiki.verify`, with the
  one toolchain its node's driver supports.

The control queue (`kernelwiki`) is consumed by `kernelwiki worker --scheduler`,
which has the index database; GPU workers only have the queue database and the
service URL. Stalled jobs (a worker killed mid-job: no heartbeat for
`stalled_after_s`) are put back by every worker's recovery loop.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import procrastinate
from procrastinate import jobs as pjobs

from app.settings import Settings
from app.tryrun.work.jobs import register_try_task

log = logging.getLogger("kernelwiki.queue")

CONTROL_QUEUE = "kernelwiki"
"""Queue of the scheduler's own tasks (sweep, nightly fan-out)."""
ANY_QUEUE = "any"
"""Queue of host-only work (target `any`); every GPU worker takes it too."""
VERIFY = "kernelwiki.verify"
SWEEP = "kernelwiki.sweep"
NIGHTLY = "kernelwiki.nightly"
MATRIX = "kernelwiki.matrix"
MATRIX_QUEUE_PREFIX = "matrix-"
"""Matrix compile jobs of one CUDA release wait in `matrix-RELEASE`: a worker serves the releases it holds."""
NOT_VERIFIED = frozenset({"error", "timeout"})
"""Statuses that do not count as 'already verified' (infrastructure faults are retried)."""
SCHEMA_LOCK_ID = 0x6B77_7175  # 'kwqu': pg_advisory_lock key while the queue schema is created


def queue_url(settings: Settings) -> str:
    """The libpq URL of the queue database: `queue_database_url`, else `db` when that is PostgreSQL."""
    url = settings.queue_database_url.get_secret_value() if settings.queue_database_url else None
    if not url and settings.db.startswith("postgresql"):
        url = settings.db
    if not url:
        raise ValueError("the job queue needs PostgreSQL: set KERNELWIKI_QUEUE_DATABASE_URL (or a PostgreSQL KERNELWIKI_DB)")
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest  # postgresql+psycopg:// → postgresql://


def lock_of(snippet_id: str, target: str) -> str:
    """Queueing lock of a verification job: one waiting job per snippet × target."""
    return f"{snippet_id}@{target}"


def queue_of(target: str) -> str:
    return target or ANY_QUEUE


def matrix_queue(release: str) -> str:
    """The queue of one CUDA release's matrix compile jobs (`matrix-13.1`)."""
    return f"{MATRIX_QUEUE_PREFIX}{release}"


def matrix_lock(snippet_id: str, target: str, release: str) -> str:
    """Queueing lock of a matrix job: one waiting job per snippet × target × release."""
    return f"matrix:{snippet_id}@{target}@{release}"


def build_app(settings: Settings) -> procrastinate.App:
    """The procrastinate App for `settings`: connector, tasks, retry policy and periodic schedules.

    Task bodies find what they need in the worker's `additional_context`:
    `runtime` (app.queue.job.Runtime) on GPU workers, `scheduler` (app.queue.scheduler.Scheduler) on the scheduler.
    """
    connect: dict[str, Any] = {"application_name": "kernelwiki"}
    if not settings.queue_synchronous_commit:
        # Queue writes need not wait for the disk: after a database crash every lost one is redone
        # safely (a lost defer by the next sweep, a lost finish by stalled-job recovery, and the
        # rerun's evidence has the same record ids). 5x the job throughput (docs/benchmarks.md).
        connect["options"] = "-c synchronous_commit=off"
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=queue_url(settings), kwargs=connect))
    # A failing job (service unreachable, runner fault) is tried again after wait, 2×wait, …
    retry = procrastinate.RetryStrategy(max_attempts=settings.job_attempts, linear_wait=settings.job_retry_wait_s)

    @app.task(name=VERIFY, queue=ANY_QUEUE, retry=retry, pass_context=True)
    def verify(context: procrastinate.JobContext, **job: Any) -> str:
        runtime = context.additional_context.get("runtime")
        if runtime is None:
            raise RuntimeError(f"{VERIFY} runs on GPU workers (kernelwiki worker --target …)")
        return runtime.handle(context.job.id, context.job.attempts, job)

    @app.task(name=MATRIX, queue=ANY_QUEUE, retry=retry, pass_context=True)
    def matrix(context: procrastinate.JobContext, **job: Any) -> str:
        runtime = context.additional_context.get("matrix_runtime")
        if runtime is None:
            raise RuntimeError(f"{MATRIX} runs on matrix workers (kernelwiki worker --toolchains …)")
        return runtime.handle(context.job.id, job)

    @app.periodic(cron=settings.sweep_cron, periodic_id="sweep", queueing_lock=SWEEP)
    @app.task(name=SWEEP, queue=CONTROL_QUEUE, pass_context=True)
    def sweep(context: procrastinate.JobContext, timestamp: int) -> str:
        return _scheduler(context).enqueue(missing_only=True).summary()

    @app.periodic(cron=settings.nightly_cron, periodic_id="nightly", queueing_lock=NIGHTLY)
    @app.task(name=NIGHTLY, queue=CONTROL_QUEUE, pass_context=True)
    def nightly(context: procrastinate.JobContext, timestamp: int) -> str:
        scheduler = _scheduler(context)
        verification = scheduler.enqueue(force=settings.nightly_force).summary()
        matrix = scheduler.enqueue_matrix(force=settings.nightly_force).summary()
        return f"verification: {verification}; matrix: {matrix}"

    register_try_task(app)  # kernelwiki.try, below every verification job in priority (app/tryrun/work/jobs.py)
    return app


def _scheduler(context: procrastinate.JobContext) -> Any:
    """The worker's app.queue.scheduler.Scheduler (control tasks run only on the scheduler)."""
    scheduler = context.additional_context.get("scheduler")
    if scheduler is None:
        raise RuntimeError("control tasks run on the scheduler (kernelwiki worker --scheduler)")
    return scheduler


def ensure_schema(settings: Settings) -> bool:
    """Create procrastinate's tables in the queue database unless present; True when created.

    One transaction under an advisory lock, so workers that start together do
    not race. Upgrading procrastinate later means applying its SQL migrations
    (docs/deploy.md).
    """
    import psycopg
    from procrastinate.schema import SchemaManager

    with psycopg.connect(queue_url(settings), connect_timeout=30) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_ID,))
        row = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        if row and row[0]:
            return False
        conn.execute(SchemaManager.get_schema())
        return True


# -- stalled jobs and status --------------------------------------------------------


async def recover_stalled(
    app: procrastinate.App, stalled_after_s: float, max_attempts: int, queues: Iterable[str] | None = None
) -> list[int]:
    """Put back the running jobs of workers silent for `stalled_after_s`; fail those out of attempts.

    A job's evidence is written with a record id derived from the job, so a job
    that had posted its evidence before its worker died is recorded once.
    """
    recovered: list[int] = []
    wanted = set(queues) if queues is not None else None
    await app.job_manager.prune_stalled_workers(stalled_after_s)
    for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s):
        if wanted is not None and job.queue not in wanted:
            continue
        try:
            if job.attempts >= max_attempts:  # as procrastinate.RetryStrategy counts
                await app.job_manager.finish_job(job, status=pjobs.Status.FAILED, delete_job=False)
                log.warning("job %s (%s) stalled on its last attempt: failed", job.id, job.queueing_lock)
            else:
                await app.job_manager.retry_job(job)
                log.warning("job %s (%s) stalled: queued again", job.id, job.queueing_lock)
                recovered.append(job.id)  # type: ignore[arg-type]  # a job read from the database has an id
        except Exception as exc:  # noqa: BLE001 - another worker recovered it first
            log.info("job %s: not recovered here (%s)", job.id, exc)
    return recovered


STATES = ("queued", "running", "stalled", "failed", "succeeded")


async def job_counts(app: procrastinate.App, stalled_after_s: float) -> dict[str, dict[str, int]]:
    """Per queue (target): queued, running, stalled, failed and succeeded jobs."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATES, 0))
    for q in await app.job_manager.list_queues_async():
        row = counts[q["name"]]
        row["queued"] = q.get("todo", 0)
        row["running"] = q.get("doing", 0)
        row["failed"] = q.get("failed", 0)
        row["succeeded"] = q.get("succeeded", 0)
    for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s):
        counts[job.queue]["stalled"] += 1
        counts[job.queue]["running"] -= 1
    return dict(counts)
