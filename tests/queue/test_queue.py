"""The verification queue for real: PostgreSQL, procrastinate, worker processes, the service over HTTP.

The verification itself is faked (tests/queue/fake_worker.py: no GPU here);
everything around it is the production code path.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from queue_fleet import Fleet, wait_for, write_page

pytestmark = pytest.mark.postgres


def pairs(records: list[dict]) -> set[tuple[str, str]]:
    return {(r["snippet_id"], r["target"]) for r in records}


def test_two_workers_each_take_only_their_targets_queue(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "route", [("sm_90a", ""), ("sm_100a", ""), ("sm_90a,sm_100a", "")])
    report = fleet.store.reindex(qwiki)
    assert sorted(report.changed_snippets) == ["route:1", "route:2", "route:3"]
    scheduler = fleet.scheduler()
    queued = scheduler.enqueue(snippet_ids=report.changed_snippets)
    scheduler.app.close()
    assert (queued.queued, dict(queued.by_target)) == (4, {"sm_90a": 2, "sm_100a": 2})
    assert {(j["queue_name"], j["target"]) for j in fleet.jobs()} == {("sm_90a", "sm_90a"), ("sm_100a", "sm_100a")}

    fleet.start_worker("sm_90a", "hopper")
    fleet.start_worker("sm_100a", "blackwell")
    records = wait_for(lambda: len(fleet.evidence()) == 4 and fleet.evidence(), what="4 evidence records")
    assert pairs(records) == {("route:1", "sm_90a"), ("route:2", "sm_100a"), ("route:3", "sm_90a"), ("route:3", "sm_100a")}
    for r in records:
        assert r["worker"] == {"sm_90a": "hopper", "sm_100a": "blackwell"}[r["target"]], r
        assert r["message"] == "", f"the worker's environment still holds credentials: {r['message']}"
    wait_for(lambda: not fleet.jobs(), what="finished jobs to leave the queue")


def test_a_worker_killed_mid_job_is_finished_by_another(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "slow", [("sm_90a", "// SLEEP 4")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    assert scheduler.enqueue().queued == 1
    scheduler.app.close()

    victim = fleet.start_worker("sm_90a", "victim")
    wait_for(lambda: list(fleet.markers.glob("*.victim.started")), what="the victim to start the job")
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    [job] = fleet.jobs()
    assert job["status"] == "doing"  # lost with its worker, until recovery

    fleet.start_worker("sm_90a", "rescuer")
    records = wait_for(fleet.evidence, timeout=90, what="the rescuer to finish the job")
    assert [(r["snippet_id"], r["target"], r["worker"]) for r in records] == [("slow:1", "sm_90a", "rescuer")]
    assert "stalled: queued again" in fleet.log("rescuer")
    wait_for(lambda: not fleet.jobs(), what="the job to leave the queue")


def test_a_job_delivered_twice_is_recorded_once(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "twice", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    assert scheduler.enqueue().queued == 1
    scheduler.app.close()

    # The first worker posts its evidence and dies before the job is acknowledged ...
    first = fleet.start_worker("sm_90a", "first", KW_TEST_HANG_AFTER_POST="twice:1")
    wait_for(lambda: list(fleet.markers.glob("*.first.posted")), what="the first delivery to post")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert len(fleet.evidence()) == 1
    # ... so the job is delivered again, to another worker.
    fleet.start_worker("sm_90a", "second")
    wait_for(lambda: not fleet.jobs(), timeout=90, what="the second delivery to finish")
    records = fleet.evidence()
    assert len(records) == 1 and records[0]["worker"] == "first"
    assert "this job's evidence was recorded before it was retried" in fleet.log("second")

    # Posting the same records again (a delivery that raced the first) changes nothing either.
    import httpx

    again = httpx.post(
        f"{fleet.url}/api/evidence", json=records, headers={"Authorization": f"Bearer {fleet.env()['KERNELWIKI_RUNNER_TOKEN']}"}
    )
    assert again.json()["inserted"] == 0 and again.json()["duplicates"] == 1
