"""Current evidence distinguishes toolchains (issue 24): a record made with an explicitly chosen CUDA release
(`verify --toolchain 13.1`, a worker's KERNELWIKI_TOOLCHAIN) never replaces the default toolchain's as a snippet's
status or its page's badge; it counts only where the default toolchain has no record."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from runner.toolchains import installed_releases, toolchains_dir

PTX_PAGE = """---
id: ptx-only
title: A PTX module
type: concept
architectures: [sm90a, sm100a]
---

```ptx
.version 8.0
.target sm_90a
.address_size 64

.visible .entry noop()
{
\tret;
}
```
"""


def _record(store: Any, target: str, status: str, stamp: str, release: str | None) -> dict[str, Any]:
    with store.engine.connect() as conn:
        content_hash = conn.execute(text("SELECT content_hash FROM snippet WHERE id = 'ptx-only:1'")).scalar_one()
    record = {
        "record_id": f"r-{target}-{status}-{release}",
        "snippet_id": "ptx-only:1",
        "page_id": "ptx-only",
        "target": target,
        "step": "compile",
        "status": status,
        "content_hash": content_hash,
        "timestamp": stamp,
        "toolchain": f"nvcc {release or '13.0'}.1",
        "lang": "ptx",
        "mode": "compile",
    }
    if release:
        record["toolchain_release"] = release
    return record


def test_a_chosen_releases_newer_record_does_not_replace_the_default_toolchains_status(store: Any, wiki_dir: Path) -> None:
    (wiki_dir / "ptx.md").write_text(PTX_PAGE, encoding="utf-8")
    store.reindex(wiki_dir)
    added = store.evidence.add(
        [
            _record(store, "sm_90a", "pass", "2026-12-01T00:00:00Z", None),  # the default toolchain
            _record(store, "sm_90a", "fail", "2026-12-02T00:00:00Z", "13.1"),  # newer, with CUDA 13.1 chosen
            _record(store, "sm_100a", "fail", "2026-12-02T00:00:00Z", "13.1"),  # the only record of sm_100a
        ]
    )
    assert added.errors == [] and added.inserted == 3
    with store.engine.connect() as conn:
        (snippet,) = store.evidence.snippets_with_evidence(conn, page_id="ptx-only")
        lines = dict(conn.execute(text("SELECT target, status FROM snippet_target WHERE snippet_id = 'ptx-only:1'")).all())
    assert snippet.target_status == {"sm_90a": "pass", "sm_100a": "fail"}
    assert lines == {"sm_90a": "pass", "sm_100a": "fail"}  # the stored statuses (listings, dashboard) agree
    assert snippet.evidence["sm_90a"][0].data.get("toolchain_release") is None  # the default's record is the current one
    history = store.evidence.history("ptx-only:1", 10)
    assert history is not None and history.total == 3  # every record is kept and listed
    bad = store.evidence.add([_record(store, "sm_90a", "pass", "2026-12-03T00:00:00Z", "13.1; drop")])
    assert bad.inserted == 0 and "toolchain_release" in bad.errors[0]


@pytest.mark.skipif("13.1" not in installed_releases(toolchains_dir().resolve()), reason="CUDA 13.1 wheels not installed")
def test_verify_with_a_chosen_toolchain_marks_its_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from app.cli.main import cli

    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "ptx.md").write_text(PTX_PAGE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'kw.db'}"
    monkeypatch.setenv("KERNELWIKI_TOOLCHAINS", str(toolchains_dir().resolve()))
    monkeypatch.setenv("KERNELWIKI_EVIDENCE", str(tmp_path / "evidence"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for extra in (["--toolchain", "13.1"], []):
        done = runner.invoke(cli, ["verify", "--wiki", str(wiki), "--db", db, "--target", "sm_90a", *extra])
        assert done.exit_code == 0, done.output
    import sqlite3

    with sqlite3.connect(tmp_path / "kw.db") as con:
        rows = con.execute("SELECT toolchain_release, data FROM evidence WHERE target = 'sm_90a' ORDER BY timestamp").fetchall()
    assert [r[0] for r in rows] == ["13.1", None]
    assert json.loads(rows[0][1])["toolchain"].startswith("nvcc 13.1") and os.path.exists(tmp_path / "kw.db")
