"""A snippet's summary never claims more than its evidence: checked on the bundled wiki and its committed evidence.

`pass` is re-derived here from the raw records (not through runner/status.py): every declared
target must have a current passing compile record, a passing SASS record where the block declares
SASS checks, and a passing run record for a `run` block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.store import Store
from tests.conftest import REPO, LiveServer


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('bundled') / 'index.db'}")
    store.create_schema()
    store.reindex(REPO / "wiki")
    result = store.evidence.load_dir(REPO / "evidence")
    assert result.errors == [] and result.inserted > 0
    return store


def _raw_current(store: Store) -> tuple[dict[str, Any], dict[tuple[str, str, str], str]]:
    """Snippet rows by id, and the newest current-content record's status per snippet × target × step."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        snippets = {r.id: r for r in conn.execute(text("SELECT id, mode, targets, content_hash, data FROM snippet"))}
        latest: dict[tuple[str, str, str], tuple[str, str]] = {}
        for r in conn.execute(text("SELECT snippet_id, target, step, status, content_hash, timestamp FROM evidence")):
            s = snippets.get(r.snippet_id)
            if s is None or r.content_hash != s.content_hash:
                continue
            key = (r.snippet_id, r.target, r.step)
            if key not in latest or r.timestamp > latest[key][1]:
                latest[key] = (r.status, r.timestamp)
    return snippets, {k: v[0] for k, v in latest.items()}


def test_no_snippet_is_summarised_pass_while_a_declared_target_lacks_a_passing_step(bundled: Store) -> None:
    snippets, latest = _raw_current(bundled)
    with bundled.engine.connect() as conn:
        public = bundled.evidence.snippets_with_evidence(conn)
    wrong = []
    for s in public:
        if s.status != "pass":
            continue
        row = snippets[s.id]
        checks = json.loads(row.data).get("checks") or {}
        steps = (
            ["compile"]
            + (["sass"] if checks.get("sass") or checks.get("no_sass") else [])
            + (["run"] if row.mode == "run" else [])
        )
        missing = [f"{t} {step}" for t in json.loads(row.targets) for step in steps if latest.get((s.id, t, step)) != "pass"]
        if missing:
            wrong.append(f"{s.id}: {', '.join(missing)}")
    assert wrong == []
    # the programs the audit named: built for a target nothing could run them on
    by_id = {s.id: s for s in public}
    for sid in ("hw-fp8:1", "hw-setmaxnreg:3", "technique-split-k:1"):
        if sid in by_id and by_id[sid].target_status and "skipped" in by_id[sid].target_status.values():
            assert by_id[sid].status == "partial"
            assert "GPU" in by_id[sid].summary and "ran on" in by_id[sid].summary


def test_every_summary_names_every_declared_target(bundled: Store) -> None:
    with bundled.engine.connect() as conn:
        public = bundled.evidence.snippets_with_evidence(conn)
    for s in public:
        if s.mode in ("sketch", "error"):
            continue
        assert set(s.target_status) == set(s.targets), s.id
        for t in s.targets:
            assert t in s.summary, (s.id, t, s.summary)


def test_a_status_filter_honours_the_target_argument(bundled: Store) -> None:
    with bundled.engine.connect() as conn:
        every = bundled.evidence.snippets_with_evidence(conn)
    partial = [s for s in every if s.status == "partial"]
    assert partial, "the bundled evidence has no partly verified snippet: this test needs one"
    s = partial[0]
    verified = next(t for t, st in s.target_status.items() if st == "pass")
    from app.evidence.store import snippet_status

    assert snippet_status(s.mode, s.evidence, [verified], sass=False) == "pass"  # fewer needed steps than the real judgement
    assert snippet_status(s.mode, s.evidence, s.targets) == "partial"


def test_the_setmaxnreg_ptxas_warning_is_next_to_the_result_in_the_api(bundled: Store, tmp_path: Path) -> None:
    from app.main import create_app
    from app.settings import Settings

    settings = Settings(wiki=REPO / "wiki", db=bundled.url, evidence=REPO / "evidence", index_on_start=False)
    with LiveServer(create_app(settings)) as server:
        page = httpx.get(f"{server.url}/api/pages/hw-setmaxnreg", timeout=30).json()
        html = httpx.get(f"{server.url}/pages/hw-setmaxnreg", timeout=30).text
        listing = httpx.get(f"{server.url}/api/snippets", params={"page": "hw-setmaxnreg"}, timeout=30).json()
    first = next(s for s in page["snippets"] if s["id"] == "hw-setmaxnreg:1")
    assert any("C7504" in w and "setmaxnreg" in w for w in first["warnings"])
    compile_records = [r for recs in first["evidence"].values() for r in recs if r["step"] == "compile"]
    assert compile_records and all(any("C7504" in w for w in r["warnings"]) for r in compile_records)
    assert any("C7504" in w for s in listing["snippets"] if s["id"] == "hw-setmaxnreg:1" for w in s["warnings"])
    assert "C7504" in html and "st-warning" in html
    assert page["evidence_text"] and "sm_100a" in page["evidence_text"]
