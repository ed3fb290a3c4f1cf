"""The bundled wiki and its committed evidence: every snippet's evidence matches its current content."""

from __future__ import annotations

import json
from pathlib import Path

from app.index.pages import load_wiki
from runner.gpus import missing_reason
from snippets.architectures import runs_on
from snippets.extract import extract_snippets

ROOT = Path(__file__).resolve().parents[2]
WIKI = ROOT / "wiki"
EVIDENCE = ROOT / "evidence"


def _snippets() -> list:
    wiki = load_wiki(WIKI)
    found = []
    for page in wiki.pages.values():
        snips, _ = extract_snippets(page.id, page.path, page.body, page.body_line, page.architectures)
        found += snips
    return found


def _records() -> list[dict]:
    records = []
    for path in sorted(EVIDENCE.glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def test_every_snippet_has_evidence_for_its_current_content_on_every_target() -> None:
    current = {(r["snippet_id"], r["target"], r["content_hash"]) for r in _records()}
    stale = [
        f"{s.path}:{s.line} {s.id} {t or '(any)'}"
        for s in _snippets()
        for t in (s.targets or [""])
        if (s.id, t, s.content_hash) not in current
    ]
    assert stale == [], (
        "snippets changed since their evidence was recorded (run `kernelwiki verify` on a GPU node):\n" + "\n".join(stale)
    )


def test_committed_runs_name_their_gpu_and_ran_on_one_their_target_runs_on() -> None:
    """A run is evidence for its target only on a GPU of the matching compute capability
    (snippets/architectures.py): an sm_100a result from an H200 would be a claim that never happened."""
    records = _records()
    assert records, "no evidence under evidence/"
    runs = [r for r in records if r["step"] == "run" and r["status"] in ("pass", "fail")]
    assert runs, "no program ran on a GPU"
    for r in runs:
        assert r["gpu_name"] and r["compute_capability"] and r["driver_version"] and r["toolchain"], r["record_id"]
        assert runs_on(r["target"], r["compute_capability"]), (
            f"{r['snippet_id']} {r['target']}: ran on {r['gpu_name']} (compute capability {r['compute_capability']})"
        )
    for r in records:
        if r["step"] == "run" and r["status"] == "skipped" and r["target"] != "any":
            assert r["gpu_name"] is None and missing_reason(r["target"]) in (r["message"] or ""), r


def test_current_snippets_have_no_failing_evidence() -> None:
    current = {s.id: s.content_hash for s in _snippets()}
    failing = [
        f"{r['snippet_id']} {r['target']} {r['step']}: {r['status']} {r['message']}"
        for r in _records()
        if current.get(r["snippet_id"]) == r["content_hash"] and r["status"] in ("fail", "error", "timeout")
    ]
    assert failing == []


def test_the_bundled_wiki_answers_what_users_type(tmp_path: Path) -> None:
    """The user stories: an agent searching `cp.async.bulk` gets the TMA page at a section."""
    from app.index.filters import Filters
    from app.store import Store

    store = Store(f"sqlite:///{tmp_path / 'index.db'}")
    store.create_schema()
    store.reindex(WIKI)
    expected = {
        "cp.async.bulk": "hw-tma",
        "TMEM": "hw-tmem",
        "tcgen05.mma": "hw-tcgen05-mma",
        "wgmma": "hw-wgmma",
        "UMMA": "hw-tcgen05-mma",
        "GMMA": "hw-wgmma",
        "mbarrier": "hw-mbarrier",
        "setmaxnreg": "hw-setmaxnreg",
        "tensor memory": "hw-tmem",
        "UTMALDG": "hw-tma",
    }
    for query, page in expected.items():
        result = store.searcher.search(query, Filters())
        assert result.results and result.results[0].id == page, (query, [r.id for r in result.results[:3]])
    assert store.searcher.search("cp.async.bulk", Filters()).results[0].section is not None
