"""Scheduling on PostgreSQL: on-edit jobs, deduplication while queued, nightly skips, the scheduler process, `jobs`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from queue_fleet import REPO, TOKEN, Fleet, wait_for, write_page

pytestmark = pytest.mark.postgres

TOOLCHAIN = "nvcc test-1.0"


def runtime(fleet: Fleet, target: str = "sm_90a", toolchain: str = TOOLCHAIN):  # type: ignore[no-untyped-def]
    """The GPU worker's job handler, in-process, with the fake verification of tests/queue/fake_worker.py."""
    sys.path.insert(0, str(Path(__file__).parent))
    import fake_worker
    from fake_worker import fake_verify

    fake_worker.MARKERS = fleet.markers

    from app.queue.client import EvidenceClient
    from app.queue.job import Runtime

    calls: list[str] = []

    def verify(snippet: dict[str, Any], tgt: str, force: bool) -> list[dict[str, Any]]:
        calls.append(snippet["id"])
        records = fake_verify(snippet, tgt, force)
        for r in records:
            r["toolchain"] = toolchain
        return records

    client = EvidenceClient(fleet.url, TOKEN, 10)
    fleet.clients.append(client)
    rt = Runtime([target], toolchain, client, verify, "inproc")
    rt.calls = calls  # type: ignore[attr-defined]
    return rt


def queued_jobs(fleet: Fleet) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(fleet.settings.queue_database_url.get_secret_value(), row_factory=dict_row) as conn:
        try:
            return conn.execute(
                "SELECT id, queue_name, status, args FROM procrastinate_jobs WHERE task_name = 'kernelwiki.verify' ORDER BY id"
            ).fetchall()
        except psycopg.errors.UndefinedTable:  # no worker has created the queue's tables yet
            return []


def test_an_edit_queues_its_snippet_once_per_target_and_replaces_older_content(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "edit", [("sm_90a,sm_100a", ""), ("sm_90a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    try:
        first = scheduler.enqueue(missing_only=True)
        assert (first.queued, first.already_queued) == (3, 0)
        again = scheduler.enqueue(missing_only=True)  # the sweep runs every minute: nothing twice
        assert (again.queued, again.skipped) == (0, 3)
        assert scheduler.enqueue().already_queued == 3  # the nightly fan-out neither, while they wait

        write_page(qwiki, "edit", [("sm_90a,sm_100a", "// edited"), ("sm_90a", "")])
        report = fleet.store.reindex(qwiki)
        assert "edit:1" in report.changed_snippets
        swept = scheduler.enqueue(missing_only=True)
        assert (swept.queued, swept.replaced, swept.skipped) == (2, 2, 1)
    finally:
        scheduler.app.close()
    jobs = queued_jobs(fleet)
    waiting = [j for j in jobs if j["status"] == "todo"]
    assert sorted((j["args"]["snippet_id"], j["queue_name"]) for j in waiting) == [
        ("edit:1", "sm_100a"),
        ("edit:1", "sm_90a"),
        ("edit:2", "sm_90a"),
    ]
    from sqlalchemy import select

    from app.index.models import SnippetRow

    with fleet.store.engine.connect() as conn:
        current = dict(conn.execute(select(SnippetRow.id, SnippetRow.content_hash)).all())
    assert all(j["args"]["content_hash"] == current[j["args"]["snippet_id"]] for j in waiting)
    assert sum(j["status"] == "cancelled" for j in jobs) == 2


def test_nightly_redoes_nothing_verified_with_the_same_hash_and_toolchain_unless_forced(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "night", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    rt = runtime(fleet)
    try:
        [job] = [j for j in _deferred(scheduler)]
        assert job["verified"] == []
        assert "compile=pass" in rt.handle(1, 0, job)
        assert len(fleet.evidence()) == 1

        _cancel_all(fleet)
        [job] = _deferred(scheduler)  # nightly: the job says who verified this content already
        assert job["verified"] == [TOOLCHAIN]
        assert "verified with nvcc test-1.0 already" in rt.handle(2, 0, job)
        newer = runtime(fleet, toolchain="nvcc test-2.0")  # a worker with another toolchain redoes it
        assert "compile=pass" in newer.handle(3, 0, job)

        _cancel_all(fleet)
        [job] = _deferred(scheduler, force=True)
        assert "compile=pass" in rt.handle(4, 0, job)
        assert rt.calls == ["night:1", "night:1"] and len(fleet.evidence()) == 3
        # A retried job whose evidence is recorded is not redone; an edited snippet's old job is dropped.
        assert "recorded before it was retried" in rt.handle(4, 1, job)
        write_page(qwiki, "night", [("sm_90a", "// edited")])
        fleet.store.reindex(qwiki)
        assert "content changed after this job was queued" in rt.handle(5, 0, job)
        assert rt.calls == ["night:1", "night:1"]
    finally:
        scheduler.app.close()


def _deferred(scheduler: Any, force: bool = False) -> list[dict[str, Any]]:
    assert scheduler.enqueue(force=force).queued >= 1
    return [j.task_kwargs for j in scheduler.app.job_manager.list_jobs(task="kernelwiki.verify", status="todo")]


def _cancel_all(fleet: Fleet) -> None:
    import psycopg

    with psycopg.connect(fleet.settings.queue_database_url.get_secret_value()) as conn:
        conn.execute("UPDATE procrastinate_jobs SET status = 'cancelled' WHERE status = 'todo'")


def test_the_scheduler_process_queues_edits_on_its_cron(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "cron", [("sm_100a", "")])
    fleet.store.reindex(qwiki)
    env = fleet.env(KERNELWIKI_DB=fleet.settings.db, KERNELWIKI_SWEEP_CRON="* * * * * */1")
    with (fleet.logs / "scheduler.log").open("wb") as log:  # the scheduler writes to its own copy of the file
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "worker", "--scheduler"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    fleet.procs["scheduler"] = proc
    jobs = wait_for(lambda: queued_jobs(fleet), timeout=60, what="the sweep to queue the snippet")
    assert [(j["args"]["snippet_id"], j["queue_name"]) for j in jobs] == [("cron:1", "sm_100a")]


def test_a_forced_fan_out_replaces_waiting_unforced_jobs_once(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "forced", [("sm_90a,sm_100a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    try:
        assert scheduler.enqueue(missing_only=True).queued == 2  # on edit: not forced
        forced = scheduler.enqueue(force=True)  # `kernelwiki jobs --enqueue --force` right after
        assert (forced.queued, forced.replaced, forced.already_queued) == (2, 2, 0)
        again = scheduler.enqueue(force=True)
        assert (again.queued, again.already_queued) == (0, 2)
        assert scheduler.enqueue().already_queued == 2  # an unforced one adds nothing to a forced job
    finally:
        scheduler.app.close()
    waiting = [j for j in queued_jobs(fleet) if j["status"] == "todo"]
    assert len(waiting) == 2 and all(j["args"]["force"] for j in waiting)


def test_jobs_shows_queued_running_stalled_and_failed_per_target(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "count", [("sm_90a,sm_100a", ""), ("sm_90a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    scheduler.enqueue()
    scheduler.app.close()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "jobs", "--json"],
        cwd=REPO,
        env=fleet.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["sm_90a"] == {"queued": 2, "running": 0, "stalled": 0, "failed": 0, "succeeded": 0}
    assert counts["sm_100a"]["queued"] == 1
    table = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "jobs"], cwd=REPO, env=fleet.env(), capture_output=True, text=True, timeout=60
    )
    assert "queued" in table.stdout and "stalled" in table.stdout and "sm_100a" in table.stdout


def test_the_sweep_leaves_content_with_any_evidence_to_the_nightly(fleet: Fleet, qwiki: Path) -> None:
    """Evidence of a fault (status error) is not 'missing': the sweep would otherwise queue it every minute."""
    write_page(qwiki, "fault", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    rt = runtime(fleet)
    scheduler = fleet.scheduler()
    try:
        [job] = _deferred(scheduler)
        original = rt.verify

        def faulty(snippet: dict[str, Any], target: str, force: bool) -> list[dict[str, Any]]:
            return [{**r, "status": "error", "message": "runner fault"} for r in original(snippet, target, force)]

        rt.verify = faulty
        assert "compile=error" in rt.handle(1, 0, job)
        _cancel_all(fleet)
        assert scheduler.enqueue(missing_only=True).queued == 0
        [again] = _deferred(scheduler)  # the nightly does retry it: an error is not 'verified'
        assert again["verified"] == []
    finally:
        scheduler.app.close()


def test_workers_that_start_together_create_the_queue_schema_once(postgres_url: str) -> None:
    import threading

    from app.queue.tasks import ensure_schema
    from app.settings import Settings

    settings = Settings(queue_database_url=postgres_url.replace("+psycopg", ""))
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(_try(ensure_schema, settings))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(map(str, results)) == ["False", "False", "False", "True"]


def _try(fn: Any, *args: Any) -> object:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported by the assertion
        return exc


def test_kernelwiki_index_queues_an_edit_at_once_without_waiting_for_the_sweep(fleet: Fleet, qwiki: Path) -> None:
    from app.main import queue_changed_snippets

    write_page(qwiki, "now", [("sm_90a,sm_100a", "")])
    report = fleet.store.reindex(qwiki)
    queue_changed_snippets(fleet.settings, fleet.store, report.changed_snippets)
    waiting = sorted((j["args"]["snippet_id"], j["queue_name"]) for j in queued_jobs(fleet) if j["status"] == "todo")
    assert waiting == [("now:1", "sm_100a"), ("now:1", "sm_90a")]
    unchanged = fleet.store.reindex(qwiki)
    assert unchanged.changed_snippets == []
