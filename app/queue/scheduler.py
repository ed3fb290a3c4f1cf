"""Planning verification jobs: which snippet × target pairs the fleet should verify, deferred into the queue.

`Scheduler.enqueue` is what the scheduler's sweep and nightly tasks run
(app/queue/tasks.py defines the tasks), and `kernelwiki queue` calls; on edit,
`enqueue_changed` queues a reindex's changed snippets at once. One job per
snippet × target is waiting at a time (its queueing lock); a waiting job for
older content is replaced.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import procrastinate
from procrastinate import jobs as pjobs

from app.queue.tasks import ANY_QUEUE, NOT_VERIFIED, VERIFY, build_app, ensure_schema, lock_of, queue_of
from app.settings import Settings

if TYPE_CHECKING:
    from app.store import Store

BATCH = 500  # jobs deferred per statement


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
            id=None,
            queue=queue_of(self.target),
            task_name=VERIFY,
            lock=None,
            queueing_lock=lock_of(self.snippet_id, self.target),
            priority=1 if not self.verified else 0,  # never-verified content first
            task_kwargs={
                "snippet_id": self.snippet_id,
                "target": self.target,
                "content_hash": self.content_hash,
                "verified": list(self.verified),  # a JSON list (procrastinate.types.JSONValue)
                "force": force,
                "queued_at": queued_at,
                "snippet": self.data,
            },
        )


def plan(
    store: Store, targets: Iterable[str], snippet_ids: Iterable[str] | None = None, missing_only: bool = False
) -> list[Planned]:
    """Every snippet × target of the index that the fleet serves (sketches are never compiled).

    missing_only: only pairs with no evidence at all for the snippet's current content.
    """
    from sqlalchemy import and_
    from sqlmodel import col, select

    from app.index.models import EvidenceRow, SnippetRow

    served = set(targets) | {ANY_QUEUE}
    wanted = set(snippet_ids) if snippet_ids is not None else None
    with store.engine.connect() as conn:
        snippets = [
            s
            for s in conn.execute(
                select(SnippetRow.id, SnippetRow.content_hash, SnippetRow.targets)
                .where(col(SnippetRow.mode).notin_(("sketch", "fragment")))  # never built, nothing to queue
                .order_by(col(SnippetRow.page_id), col(SnippetRow.position))
            )
            if wanted is None or s.id in wanted
        ]
        if not snippets:
            return []
        # Evidence for the current content only (the join), compile step: one record per run.
        query = (
            select(EvidenceRow.snippet_id, EvidenceRow.target, EvidenceRow.status, EvidenceRow.data)
            .join(
                SnippetRow,
                and_(
                    col(SnippetRow.id) == col(EvidenceRow.snippet_id),
                    col(SnippetRow.content_hash) == col(EvidenceRow.content_hash),
                ),
            )
            .where(EvidenceRow.step == "compile")
        )
        if wanted is not None and len(wanted) <= 1000:
            query = query.where(col(EvidenceRow.snippet_id).in_(sorted(wanted)))
        evidenced: set[tuple[str, str]] = set()
        verified: dict[tuple[str, str], set[str]] = defaultdict(set)
        for sid, target, status, record_data in conn.execute(query):
            evidenced.add((sid, target))
            if not missing_only and status not in NOT_VERIFIED:
                toolchain = json.loads(record_data).get("toolchain")
                if toolchain:
                    verified[(sid, target)].add(toolchain)
        pairs = [
            (s.id, s.content_hash, t)
            for s in snippets
            for t in json.loads(s.targets)
            if t in served and not (missing_only and (s.id, t) in evidenced)
        ]
        ids = sorted({sid for sid, _, _ in pairs})
        data: dict[str, dict[str, Any]] = {}
        for k in range(0, len(ids), 1000):
            chunk = ids[k : k + 1000]
            data.update(
                (sid, json.loads(d))
                for sid, d in conn.execute(select(col(SnippetRow.id), col(SnippetRow.data)).where(col(SnippetRow.id).in_(chunk)))
            )
    return [Planned(sid, t, h, data[sid], sorted(verified.get((sid, t), ()))) for sid, h, t in pairs]


class Scheduler:
    """Defers verification jobs for the index of `store` into the queue of `app`."""

    def __init__(self, app: procrastinate.App, store: Store, settings: Settings) -> None:
        self.app = app
        self.store = store
        self.settings = settings

    def enqueue(
        self,
        snippet_ids: Iterable[str] | None = None,
        targets: Iterable[str] | None = None,
        force: bool = False,
        missing_only: bool = False,
    ) -> EnqueueReport:
        """Queue verification of snippet × target pairs, one job per pair (deduplicated while queued).

        missing_only: only pairs with no evidence for the current content and no job for it yet (on edit).
        force: workers redo pairs already verified with their toolchain.
        """
        report = EnqueueReport()
        wanted = list(targets) if targets is not None else list(self.settings.targets)
        planned = [
            p
            for p in plan(self.store, self.settings.targets, snippet_ids, missing_only)
            if p.target in wanted or p.target == ANY_QUEUE
        ]
        if missing_only:  # and no job for this content yet, in any state (a failed one stays failed)
            seen = self._jobbed({p.snippet_id for p in planned})
            keep = [p for p in planned if (p.snippet_id, p.target, p.content_hash) not in seen]
            report.skipped = len(planned) - len(keep)
            planned = keep
        if not planned:
            return report
        queued = self._queued({lock_of(p.snippet_id, p.target) for p in planned})
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        fresh: list[pjobs.Job] = []
        for p in planned:
            waiting = queued.get(lock_of(p.snippet_id, p.target))
            if waiting is not None:
                job_id, waiting_hash, waiting_forced = waiting
                # The waiting job does what this one would, unless this one is forced and it is not
                # (a forced fan-out must not be swallowed by the on-edit job queued at start).
                if waiting_hash == p.content_hash and (waiting_forced or not force):
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

    def _queued(self, locks: set[str]) -> dict[str, tuple[int, str, bool]]:
        """Waiting verification jobs by queueing lock: (job id, content hash, forced)."""
        if not locks:
            return {}
        rows = self.app.connector.get_sync_connector().execute_query_all(
            query="SELECT id, queueing_lock, args->>'content_hash' AS content_hash, "
            "coalesce((args->>'force')::boolean, false) AS force FROM procrastinate_jobs "
            "WHERE status = 'todo' AND task_name = %(task)s AND queueing_lock = ANY(%(locks)s)",
            task=VERIFY,
            locks=sorted(locks),
        )
        return {r["queueing_lock"]: (r["id"], r["content_hash"], bool(r["force"])) for r in rows}

    def _jobbed(self, snippet_ids: set[str]) -> set[tuple[str, str, str]]:
        """(snippet, target, content hash) that have a verification job in any state."""
        if not snippet_ids:
            return set()
        rows = self.app.connector.get_sync_connector().execute_query_all(
            query="SELECT DISTINCT args->>'snippet_id' AS snippet_id, args->>'target' AS target, "
            "args->>'content_hash' AS content_hash FROM procrastinate_jobs "
            "WHERE task_name = %(task)s AND args->>'snippet_id' = ANY(%(ids)s)",
            task=VERIFY,
            ids=sorted(snippet_ids),
        )
        return {(r["snippet_id"], r["target"], r["content_hash"]) for r in rows}


def enqueue_changed(settings: Settings, store: Store, snippet_ids: list[str]) -> EnqueueReport:
    """On edit, at once: queue verification of a reindex's `changed_snippets` (one job per target)."""
    if not snippet_ids:
        return EnqueueReport()
    ensure_schema(settings)
    app = build_app(settings)
    with app.open():
        return Scheduler(app, store, settings).enqueue(snippet_ids=snippet_ids)
