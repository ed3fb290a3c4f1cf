"""The toolchain matrix on the queue (issue 24): per-release queues, a real matrix worker, cells posted into SQL.

The service runs on PostgreSQL over HTTP; the worker is `kernelwiki worker --toolchains system,13.1` as a process,
compiling with the system nvcc (13.0) and the CUDA 13.1 wheels at KERNELWIKI_TOOLCHAINS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from queue_fleet import REPO, TOKEN, Fleet, wait_for, write_page

from runner.toolchains import installed_releases, toolchains_dir

pytestmark = pytest.mark.postgres

ROOT = toolchains_dir().resolve()
needs_13_1 = pytest.mark.skipif("13.1" not in installed_releases(ROOT), reason=f"CUDA 13.1 wheels are not installed under {ROOT}")


def matrix_jobs(fleet: Fleet) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(fleet.settings.queue_database_url.get_secret_value(), row_factory=dict_row) as conn:
        try:
            return conn.execute(
                "SELECT id, queue_name, status, queueing_lock, args FROM procrastinate_jobs "
                "WHERE task_name = 'kernelwiki.matrix' ORDER BY id"
            ).fetchall()
        except psycopg.errors.UndefinedTable:  # the scheduler has not created the queue's tables yet
            return []


def _releases(fleet: Fleet, snippet_id: str) -> dict[str, str]:
    answer = httpx.get(f"{fleet.url}/api/snippets/{snippet_id}/matrix", timeout=10)
    if answer.status_code != 200:
        return {}
    return {c["release"]: c["status"] for c in answer.json()["cells"]}


@needs_13_1
def test_a_matrix_worker_compiles_each_release_queue_and_its_cells_land_in_sql(fleet: Fleet, qwiki: Path, tmp_path: Path) -> None:
    write_page(qwiki, "mx", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    scheduler = fleet.scheduler()
    try:
        first = scheduler.enqueue_matrix(releases=["13.0", "13.1"])
        assert first.queued == 2 and dict(first.by_target) == {"matrix-13.0": 1, "matrix-13.1": 1}
        assert scheduler.enqueue_matrix(releases=["13.0", "13.1"]).already_queued == 2  # one job per cell while it waits
        jobs = matrix_jobs(fleet)
        assert sorted(j["queueing_lock"] for j in jobs) == ["matrix:mx:1@sm_90a@13.0", "matrix:mx:1@sm_90a@13.1"]

        env = fleet.env(KERNELWIKI_TOOLCHAINS=str(ROOT), KERNELWIKI_WORKER_CACHE=str(tmp_path / "cache"))
        with (fleet.logs / "matrix.log").open("wb") as log:
            fleet.procs["matrix"] = subprocess.Popen(
                [sys.executable, "-m", "app.cli.main", "worker", "--toolchains", "system,13.1"],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        done = wait_for(lambda: _releases(fleet, "mx:1") == {"13.0": "pass", "13.1": "pass"}, 180, "the cells of both releases")
        assert done, fleet.log("matrix")
        assert matrix_jobs(fleet) == []  # both done (successful jobs are deleted)
        sass = httpx.get(f"{fleet.url}/api/snippets/mx:1/sass", params={"toolchain": "13.1"}, timeout=10).json()
        assert sass["toolchain"].startswith("nvcc 13.1") and "EXIT" in sass["text"]  # the listing came with the cells
        matrix = httpx.get(f"{fleet.url}/api/snippets/mx:1/matrix", timeout=10).json()
        assert matrix["known_good"] == "known good: CUDA 13.0–13.1" and matrix["flips"] == []

        # Incremental: same content, same toolchains → nothing; an edit → both releases again.
        assert scheduler.enqueue_matrix(releases=["13.0", "13.1"]).queued == 0
        write_page(qwiki, "mx", [("sm_90a", "// edited")])
        fleet.store.reindex(qwiki)
        again = scheduler.enqueue_matrix(releases=["13.0", "13.1"])
        assert again.queued == 2
        wait_for(lambda: matrix_jobs(fleet) == [], 180, "the edited snippet's matrix jobs")
        from app.index.models import MatrixCellRow, SnippetRow

        with fleet.store.engine.connect() as conn:
            current = conn.execute(
                __import__("sqlalchemy").select(SnippetRow.content_hash).where(SnippetRow.id == "mx:1")
            ).scalar_one()
            hashes = {r.content_hash for r in conn.execute(__import__("sqlalchemy").select(MatrixCellRow.content_hash))}
            prints = {r.fingerprint for r in conn.execute(__import__("sqlalchemy").select(MatrixCellRow.fingerprint))}
        assert hashes == {current} and len(prints) == 2 and None not in prints  # each release's toolchain stamp
        # Forced (nightly_force): every cell again, and the worker compiles though the stamp matches.
        assert scheduler.enqueue_matrix(releases=["13.0", "13.1"], force=True).queued == 2
        wait_for(lambda: matrix_jobs(fleet) == [], 180, "the forced jobs")
        assert "skipped" not in fleet.log("matrix")
    finally:
        scheduler.app.close()


def test_a_changed_toolchain_stamp_renews_that_releases_cells_only(fleet: Fleet, qwiki: Path) -> None:
    from app.evidence.matrix_cells import store_cells
    from app.queue.scheduler import plan_matrix
    from runner.matrix import MatrixCell

    write_page(qwiki, "st", [("sm_90a,sm_100a", "")])
    fleet.store.reindex(qwiki)
    from app.index.models import SnippetRow

    with fleet.store.engine.connect() as conn:
        h = conn.execute(__import__("sqlalchemy").select(SnippetRow.content_hash).where(SnippetRow.id == "st:1")).scalar_one()

    def cell(target: str, release: str, stamp: str) -> MatrixCell:
        return MatrixCell("st:1", "st", target, release, f"nvcc {release}", h, "compile", "cuda", "pass", timestamp=stamp)

    with fleet.store.engine.begin() as conn:
        store_cells(
            conn,
            [cell("sm_90a", "13.0", "2026-12-01T00:00:00Z"), cell("sm_100a", "13.0", "2026-12-01T00:00:00Z")],
            "request",
            "A",
        )
        store_cells(
            conn,
            [cell("sm_90a", "13.1", "2026-12-01T00:00:00Z"), cell("sm_100a", "13.1", "2026-12-01T00:00:00Z")],
            "request",
            "X",
        )
    assert plan_matrix(fleet.store, ["13.0", "13.1"]) == []  # every cell current
    with fleet.store.engine.begin() as conn:  # a worker with 13.0 reinstalled (another wheel set) posted one cell
        store_cells(conn, [cell("sm_90a", "13.0", "2026-12-02T00:00:00Z")], "request", "B")
    planned = plan_matrix(fleet.store, ["13.0", "13.1"])
    assert [(p.target, p.release, p.stamp, p.fresh) for p in planned] == [("sm_100a", "13.0", "A", False)]
    assert len(plan_matrix(fleet.store, ["13.0", "13.1", "13.2"])) == 3  # a new release: its cells are missing


def test_posted_cells_are_checked_and_need_the_runner_token(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "pc", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    from app.index.models import SnippetRow

    with fleet.store.engine.connect() as conn:
        h = conn.execute(__import__("sqlalchemy").select(SnippetRow.content_hash).where(SnippetRow.id == "pc:1")).scalar_one()
    listing = "\tEXIT ;\n"
    import hashlib

    digest = hashlib.sha256(listing.encode()).hexdigest()
    good = {
        "snippet_id": "pc:1", "page_id": "pc", "target": "sm_90a", "release": "13.1", "toolchain": "nvcc 13.1.115",
        "content_hash": h, "mode": "compile", "lang": "cuda", "status": "pass", "registers": 8, "sass": digest,
        "timestamp": "2026-12-03T20:00:00Z",
    }  # fmt: skip
    url = f"{fleet.url}/api/matrix/cells"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(url, json={"cells": [good]}, timeout=10).status_code == 401
    cases = [
        ({"cells": [good | {"snippet_id": "pc:9"}], "artifacts": {digest: listing}}, "cells.0.snippet_id"),
        ({"cells": [good | {"page_id": "other"}], "artifacts": {digest: listing}}, "cells.0.page_id"),
        ({"cells": [good]}, "cells.0.sass"),  # names a listing nobody sent
        ({"cells": [good], "artifacts": {digest: listing + "x"}}, f"artifacts.{digest}"),
        ({"cells": [good | {"status": "great"}], "artifacts": {digest: listing}}, "cells.0.status"),
        ({"cells": [good | {"release": "13.1; drop"}], "artifacts": {digest: listing}}, "cells.0.release"),
        ({"cells": []}, "cells"),
    ]
    for body, field in cases:
        answer = httpx.post(url, json=body, headers=auth, timeout=10)
        assert answer.status_code == 422 and f"'{field}'" in answer.text, (field, answer.text)
    assert httpx.post(url, content=b"[" * 100, headers=auth, timeout=10).status_code == 422
    ok = httpx.post(url, json={"cells": [good], "fingerprint": "F", "artifacts": {digest: listing}}, headers=auth, timeout=10)
    assert ok.status_code == 200 and ok.json() == {"inserted": 1, "replaced": 0, "kept": 0}
    older = good | {"timestamp": "2026-12-01T00:00:00Z", "registers": 99}
    again = httpx.post(url, json={"cells": [older]}, headers=auth, timeout=10)  # its listing is in the store now
    assert again.json() == {"inserted": 0, "replaced": 0, "kept": 1}  # an older observation never replaces a newer one
    sass = httpx.get(f"{fleet.url}/api/snippets/pc:1/sass", timeout=10).json()
    assert sass["text"] == listing and sass["release"] == "13.1"
    assert os.path.exists(fleet.settings.evidence / "artifacts" / digest[:2] / f"{digest}.txt.gz")


def test_the_nightly_task_queues_the_matrix_beside_the_verification(fleet: Fleet, qwiki: Path) -> None:
    write_page(qwiki, "nightly", [("sm_90a", "")])
    fleet.store.reindex(qwiki)
    env = fleet.env(
        KERNELWIKI_DB=fleet.settings.db,
        KERNELWIKI_NIGHTLY_CRON="* * * * * */1",  # every second
        KERNELWIKI_SWEEP_CRON="0 0 1 1 *",
        KERNELWIKI_MATRIX_RELEASES='["13.0", "13.1"]',
    )
    with (fleet.logs / "scheduler.log").open("wb") as log:
        fleet.procs["scheduler"] = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "worker", "--scheduler"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    jobs = wait_for(lambda: len(matrix_jobs(fleet)) == 2 and matrix_jobs(fleet), 60, "the nightly matrix jobs")
    assert sorted(j["queue_name"] for j in jobs) == ["matrix-13.0", "matrix-13.1"]
    wait_for(lambda: "matrix: 0 queued" in fleet.log("scheduler"), 60, "a second nightly run that adds nothing")
    assert "verification: " in fleet.log("scheduler")
    counts = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "jobs", "--json"],
        cwd=REPO,
        env=fleet.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(counts.stdout)["matrix-13.1"]["queued"] == 1, counts.stderr
    enqueue = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "jobs", "--enqueue", "--matrix"],
        cwd=REPO,
        env=fleet.env(KERNELWIKI_DB=fleet.settings.db, KERNELWIKI_MATRIX_RELEASES='["13.0", "13.1"]'),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert enqueue.returncode == 0 and "matrix: 0 queued (none), 0 replaced, 2 already queued" in enqueue.stdout, enqueue.stderr
