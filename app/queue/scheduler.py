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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import procrastinate
from procrastinate import jobs as pjobs

from app.queue.tasks import (
    ANY_QUEUE,
    MATRIX,
    NOT_VERIFIED,
    VERIFY,
    build_app,
    ensure_schema,
    lock_of,
    matrix_lock,
    matrix_queue,
    queue_of,
)
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


@dataclass
class PlannedCell:
    """One matrix compile job to defer: a snippet × target × CUDA release."""

    snippet_id: str
    target: str
    release: str
    content_hash: str
    data: dict[str, Any]
    stamp: str | None  # the fingerprint its stored cell was observed with, for the same content (None: no such cell)
    fresh: bool  # no cell for this content at all (first)

    def job(self, force: bool, queued_at: str) -> pjobs.Job:
        return pjobs.Job(
            id=None,
            queue=matrix_queue(self.release),
            task_name=MATRIX,
            lock=None,
            queueing_lock=matrix_lock(self.snippet_id, self.target, self.release),
            priority=1 if self.fresh else 0,  # new content first
            task_kwargs={
                "snippet_id": self.snippet_id,
                "target": self.target,
                "release": self.release,
                "content_hash": self.content_hash,
                "stamp": self.stamp,
                "force": force,
                "queued_at": queued_at,
                "snippet": self.data,
            },
        )


def plan_matrix(
    store: Store, releases: Iterable[str] | None = None, snippet_ids: Iterable[str] | None = None, force: bool = False
) -> list[PlannedCell]:
    """Matrix cells to (re)compute, incrementally: content + toolchain stamp.

    A snippet × target × release needs a job when it has no cell, when its cell was observed for other
    content, or when workers have since posted cells of that release with another toolchain fingerprint
    (the newest posted fingerprint of a release is its stamp; a cell of the committed file has none, so the
    first posted fingerprint of a release renews that release's file cells once). `force`: every one.
    `releases`: default the releases the matrix has cells of. Sketches and fragments are never compiled.
    """
    import sqlalchemy as sa
    from sqlmodel import col, select

    from app.index.models import MatrixCellRow, SnippetRow, table_of
    from runner.toolchains import release_key

    m = table_of(MatrixCellRow)
    wanted = set(snippet_ids) if snippet_ids is not None else None
    with store.engine.connect() as conn:
        cells = {
            (r.snippet_id, r.target, r.release): r
            for r in conn.execute(
                sa.select(m.c.snippet_id, m.c.target, m.c.release, m.c.content_hash, m.c.fingerprint, m.c.timestamp)
            )
        }
        chosen = sorted(set(releases) if releases else {k[2] for k in cells}, key=release_key)
        newest: dict[str, tuple[str, str]] = {}  # release → (timestamp, fingerprint) of its newest posted cell
        for (_, _, release), r in cells.items():
            if r.fingerprint and (release not in newest or r.timestamp > newest[release][0]):
                newest[release] = (r.timestamp, r.fingerprint)
        snippets = [
            s
            for s in conn.execute(
                select(SnippetRow.id, SnippetRow.content_hash, SnippetRow.targets, SnippetRow.data)
                .where(col(SnippetRow.mode).notin_(("sketch", "fragment")))
                .order_by(col(SnippetRow.page_id), col(SnippetRow.position))
            )
            if wanted is None or s.id in wanted
        ]
    out: list[PlannedCell] = []
    for s in snippets:
        data: dict[str, Any] | None = None
        for target in json.loads(s.targets):
            for release in chosen:
                cell = cells.get((s.id, target, release))
                same = cell is not None and cell.content_hash == s.content_hash
                stamp = cell.fingerprint if same and cell is not None else None
                current = same and (release not in newest or stamp == newest[release][1])
                if current and not force:
                    continue
                data = data if data is not None else json.loads(s.data)
                out.append(PlannedCell(s.id, target, release, s.content_hash, data, stamp, not same))
    return out


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
        locks = [lock_of(p.snippet_id, p.target) for p in planned]
        self._defer_replacing(planned, locks, self._queued(set(locks)), force, report)
        return report

    def enqueue_matrix(
        self, snippet_ids: Iterable[str] | None = None, releases: Iterable[str] | None = None, force: bool = False
    ) -> EnqueueReport:
        """Queue matrix compile jobs, one per snippet × target × release whose cell is not current (`plan_matrix`),
        each in its release's queue (`matrix-13.1`); a waiting job for older content is replaced.

        releases: default `matrix_releases`, else the releases the matrix has cells of. force: every cell, and
        workers recompile even a current one."""
        report = EnqueueReport()
        chosen = list(releases) if releases is not None else list(self.settings.matrix_releases) or None
        planned = plan_matrix(self.store, chosen, snippet_ids, force)
        if not planned:
            return report
        locks = [matrix_lock(p.snippet_id, p.target, p.release) for p in planned]
        self._defer_replacing(planned, locks, self._queued(set(locks), MATRIX), force, report)
        return report

    def _defer_replacing(
        self,
        planned: Sequence[Planned | PlannedCell],
        locks: Sequence[str],
        queued: dict[str, tuple[int, str, bool]],
        force: bool,
        report: EnqueueReport,
    ) -> None:
        """Queue each planned job (its queueing lock in `locks`) unless a waiting job does the same; a waiting job
        for other content is cancelled and replaced."""
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        fresh: list[pjobs.Job] = []
        for p, lock in zip(planned, locks, strict=True):
            waiting = queued.get(lock)
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

    def _queued(self, locks: set[str], task: str = VERIFY) -> dict[str, tuple[int, str, bool]]:
        """Waiting jobs of `task` by queueing lock: (job id, content hash, forced)."""
        if not locks:
            return {}
        rows = self.app.connector.get_sync_connector().execute_query_all(
            query="SELECT id, queueing_lock, args->>'content_hash' AS content_hash, "
            "coalesce((args->>'force')::boolean, false) AS force FROM procrastinate_jobs "
            "WHERE status = 'todo' AND task_name = %(task)s AND queueing_lock = ANY(%(locks)s)",
            task=task,
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
