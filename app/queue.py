"""The verification job queue: procrastinate on PostgreSQL, one queue per target.

Jobs:
- `kernelwiki.verify` (queue = the target, e.g. `sm_90a`; `any` for host-only
  blocks on pages without architectures): verify one snippet for one target on
  a GPU worker (app/worker.py) and post the evidence to the service. Its
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
- `kernelwiki.nightly` (periodic, `nightly_cron`, control queue): fan out every
  snippet × target. Each job carries the toolchains that already verified that
  content; a worker whose toolchain is among them skips it unless forced.

The control queue (`kernelwiki`) is consumed by `kernelwiki worker --scheduler`,
which has the index database; GPU workers only have the queue database and the
service URL. Stalled jobs (a worker killed mid-job: no heartbeat for
`stalled_after_s`) are put back by every worker's recovery loop.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable

import procrastinate
from procrastinate import jobs as pjobs

from app.settings import Settings

if TYPE_CHECKING:
    from app.store import Store

log = logging.getLogger("kernelwiki.queue")

CONTROL_QUEUE = "kernelwiki"
"""Queue of the scheduler's own tasks (sweep, nightly fan-out)."""
ANY_QUEUE = "any"
"""Queue of host-only work (target `any`); every GPU worker takes it too."""
VERIFY = "kernelwiki.verify"
SWEEP = "kernelwiki.sweep"
NIGHTLY = "kernelwiki.nightly"
NOT_VERIFIED = frozenset({"error", "timeout"})
"""Statuses that do not count as 'already verified' (infrastructure faults are retried)."""
SCHEMA_LOCK_ID = 0x6B77_7175  # 'kwqu': pg_advisory_lock key while the queue schema is created
BATCH = 500  # jobs deferred per statement


def queue_url(settings: Settings) -> str:
    """The libpq URL of the queue database: `queue_database_url`, else `db` when that is PostgreSQL."""
    url = settings.queue_database_url.get_secret_value() if settings.queue_database_url else None
    if not url and settings.db.startswith("postgresql"):
        url = settings.db
    if not url:
        raise ValueError(
            "the job queue needs PostgreSQL: set KERNELWIKI_QUEUE_DATABASE_URL (or a PostgreSQL KERNELWIKI_DB)"
        )
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest  # postgresql+psycopg:// → postgresql://


def lock_of(snippet_id: str, target: str) -> str:
    """Queueing lock of a verification job: one waiting job per snippet × target."""
    return f"{snippet_id}@{target}"


def queue_of(target: str) -> str:
    return target or ANY_QUEUE


def build_app(settings: Settings) -> procrastinate.App:
    """The procrastinate App for `settings`: connector, tasks, retry policy and periodic schedules.

    Task bodies find what they need in the worker's `additional_context`:
    `runtime` (app.verify_job.Runtime) on GPU workers, `scheduler` (Scheduler) on the scheduler.
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

    @app.periodic(cron=settings.sweep_cron, periodic_id="sweep", queueing_lock=SWEEP)
    @app.task(name=SWEEP, queue=CONTROL_QUEUE, pass_context=True)
    def sweep(context: procrastinate.JobContext, timestamp: int) -> str:
        return _scheduler(context).enqueue(missing_only=True).summary()

    @app.periodic(cron=settings.nightly_cron, periodic_id="nightly", queueing_lock=NIGHTLY)
    @app.task(name=NIGHTLY, queue=CONTROL_QUEUE, pass_context=True)
    def nightly(context: procrastinate.JobContext, timestamp: int) -> str:
        return _scheduler(context).enqueue(force=settings.nightly_force).summary()

    return app


def _scheduler(context: procrastinate.JobContext) -> Scheduler:
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
        conn.execute(SchemaManager.get_schema())  # type: ignore[arg-type]
        return True


# -- planning and deferring verification jobs ------------------------------------


@dataclass
class EnqueueReport:
    """What one fan-out did."""

    queued: int = 0  # new jobs
    replaced: int = 0  # queued jobs for older content, cancelled and queued again
    already_queued: int = 0  # the same content was already waiting
    skipped: int = 0  # verified or jobbed already (missing_only)
    by_target: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def summary(self) -> str:
        targets = ", ".join(f"{t}: {n}" for t, n in sorted(self.by_target.items())) or "none"
        return (
            f"{self.queued} queued ({targets}), {self.replaced} replaced, "
            f"{self.already_queued} already queued, {self.skipped} skipped"
        )


@dataclass
class Planned:
    """One verification job to defer."""

    snippet_id: str
    target: str
    content_hash: str
    data: dict[str, Any]
    verified: list[str]  # toolchains with current-hash evidence for this target

    def job(self, force: bool, queued_at: str) -> pjobs.Job:
        return pjobs.Job(
            id=None, queue=queue_of(self.target), task_name=VERIFY, lock=None, queueing_lock=lock_of(self.snippet_id, self.target),
            priority=1 if not self.verified else 0,  # never-verified content first
            task_kwargs={
                "snippet_id": self.snippet_id, "target": self.target, "content_hash": self.content_hash,
                "verified": self.verified, "force": force, "queued_at": queued_at, "snippet": self.data,
            },
        )  # fmt: skip


def plan(store: Store, targets: Iterable[str], snippet_ids: Iterable[str] | None = None, missing_only: bool = False) -> list[Planned]:
    """Every snippet × target of the index that the fleet serves (sketches are never compiled).

    missing_only: only pairs with no evidence at all for the snippet's current content.
    """
    from sqlalchemy import and_, select

    from app.models import EvidenceRow, SnippetRow

    served = set(targets) | {ANY_QUEUE}
    wanted = set(snippet_ids) if snippet_ids is not None else None
    with store.engine.connect() as conn:
        snippets = [
            s for s in conn.execute(
                select(SnippetRow.id, SnippetRow.content_hash, SnippetRow.targets)
                .where(SnippetRow.mode != "sketch").order_by(SnippetRow.page_id, SnippetRow.position)
            ) if wanted is None or s.id in wanted
        ]  # fmt: skip
        if not snippets:
            return []
        # Evidence for the current content only (the join), compile step: one record per run.
        query = (
            select(EvidenceRow.snippet_id, EvidenceRow.target, EvidenceRow.status, EvidenceRow.data)
            .join(SnippetRow, and_(SnippetRow.id == EvidenceRow.snippet_id, SnippetRow.content_hash == EvidenceRow.content_hash))
            .where(EvidenceRow.step == "compile")
        )  # fmt: skip
        if wanted is not None and len(wanted) <= 1000:
            query = query.where(EvidenceRow.snippet_id.in_(sorted(wanted)))
        evidenced: set[tuple[str, str]] = set()
        verified: dict[tuple[str, str], set[str]] = defaultdict(set)
        for sid, target, status, data in conn.execute(query):
            evidenced.add((sid, target))
            if not missing_only and status not in NOT_VERIFIED:
                toolchain = json.loads(data).get("toolchain")
                if toolchain:
                    verified[(sid, target)].add(toolchain)
        pairs = [
            (s.id, s.content_hash, t) for s in snippets for t in json.loads(s.targets)
            if t in served and not (missing_only and (s.id, t) in evidenced)
        ]  # fmt: skip
        ids = sorted({sid for sid, _, _ in pairs})
        data: dict[str, dict[str, Any]] = {}
        for k in range(0, len(ids), 1000):
            chunk = ids[k : k + 1000]
            data.update((sid, json.loads(d)) for sid, d in conn.execute(select(SnippetRow.id, SnippetRow.data).where(SnippetRow.id.in_(chunk))))
    return [Planned(sid, t, h, data[sid], sorted(verified.get((sid, t), ()))) for sid, h, t in pairs]


class Scheduler:
    """Defers verification jobs for the index of `store` into the queue of `app`."""

    def __init__(self, app: procrastinate.App, store: Store, settings: Settings) -> None:
        self.app = app
        self.store = store
        self.settings = settings

    def enqueue(
        self, snippet_ids: Iterable[str] | None = None, targets: Iterable[str] | None = None,
        force: bool = False, missing_only: bool = False,
    ) -> EnqueueReport:  # fmt: skip
        """Queue verification of snippet × target pairs, one job per pair (deduplicated while queued).

        missing_only: only pairs with no evidence for the current content and no job for it yet (on edit).
        force: workers redo pairs already verified with their toolchain.
        """
        report = EnqueueReport()
        wanted = list(targets) if targets is not None else list(self.settings.targets)
        planned = [
            p for p in plan(self.store, self.settings.targets, snippet_ids, missing_only)
            if p.target in wanted or p.target == ANY_QUEUE
        ]  # fmt: skip
        if missing_only:  # and no job for this content yet, in any state (a failed one stays failed)
            seen = self._jobbed({p.snippet_id for p in planned})
            keep = [p for p in planned if (p.snippet_id, p.target, p.content_hash) not in seen]
            report.skipped = len(planned) - len(keep)
            planned = keep
        if not planned:
            return report
        queued = self._queued({lock_of(p.snippet_id, p.target) for p in planned})
        now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        fresh: list[pjobs.Job] = []
        for p in planned:
            waiting = queued.get(lock_of(p.snippet_id, p.target))
            if waiting is not None:
                job_id, waiting_hash = waiting
                if waiting_hash == p.content_hash:
                    report.already_queued += 1
                    continue
                if self.app.job_manager.cancel_job_by_id(job_id):
                    report.replaced += 1
                # else it started meanwhile: the new content is queued all the same
            fresh.append(p.job(force, now))
        for i in range(0, len(fresh), BATCH):
            self._defer(fresh[i : i + BATCH], report)
        return report

    def _defer(self, batch: list[pjobs.Job], report: EnqueueReport) -> None:
        try:
            done = self.app.job_manager.batch_defer_jobs(batch)
        except procrastinate.exceptions.AlreadyEnqueued:
            # Someone queued some of these meanwhile: go one by one.
            done = []
            for job in batch:
                try:
                    done += self.app.job_manager.batch_defer_jobs([job])
                except procrastinate.exceptions.AlreadyEnqueued:
                    report.already_queued += 1
        for job in done:
            report.queued += 1
            report.by_target[job.queue] += 1

    def _queued(self, locks: set[str]) -> dict[str, tuple[int, str]]:
        """Waiting verification jobs by queueing lock: (job id, content hash)."""
        if not locks:
            return {}
        rows = self.app.connector.get_sync_connector().execute_query_all(
            query="SELECT id, queueing_lock, args->>'content_hash' AS content_hash FROM procrastinate_jobs "
            "WHERE status = 'todo' AND task_name = %(task)s AND queueing_lock = ANY(%(locks)s)",
            task=VERIFY, locks=sorted(locks),
        )  # fmt: skip
        return {r["queueing_lock"]: (r["id"], r["content_hash"]) for r in rows}

    def _jobbed(self, snippet_ids: set[str]) -> set[tuple[str, str, str]]:
        """(snippet, target, content hash) that have a verification job in any state."""
        if not snippet_ids:
            return set()
        rows = self.app.connector.get_sync_connector().execute_query_all(
            query="SELECT DISTINCT args->>'snippet_id' AS snippet_id, args->>'target' AS target, "
            "args->>'content_hash' AS content_hash FROM procrastinate_jobs "
            "WHERE task_name = %(task)s AND args->>'snippet_id' = ANY(%(ids)s)",
            task=VERIFY, ids=sorted(snippet_ids),
        )  # fmt: skip
        return {(r["snippet_id"], r["target"], r["content_hash"]) for r in rows}


def enqueue_changed(settings: Settings, store: Store, snippet_ids: list[str]) -> EnqueueReport:
    """On edit, at once: queue verification of a reindex's `changed_snippets` (one job per target)."""
    if not snippet_ids:
        return EnqueueReport()
    ensure_schema(settings)
    app = build_app(settings)
    with app.open():
        return Scheduler(app, store, settings).enqueue(snippet_ids=snippet_ids)


# -- stalled jobs and status --------------------------------------------------------


async def recover_stalled(app: procrastinate.App, stalled_after_s: float, max_attempts: int, queues: Iterable[str] | None = None) -> list[int]:
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
                recovered.append(job.id)  # type: ignore[arg-type]
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
