"""Evidence records, JSONL, the result cache, summaries, and the mapping of cached results to page lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cache import ResultCache, cache_key
from runner.evidence import EvidenceRecord, compute_record_id, read_jsonl, write_jsonl
from runner.outcome import StepOutcome, to_record
from runner.verify import combined_status, summarize
from snippets import extract_snippets


def record(**overrides: object) -> EvidenceRecord:
    base: dict[str, object] = dict(
        page_id="p",
        snippet_id="p:1",
        path="p.md",
        line=10,
        lang="cuda",
        target="sm_90a",
        step="compile",
        status="pass",
        message="",
        content_hash="abc",
        toolchain="nvcc 13.0.88",
        timestamp="2026-01-01T00:00:00Z",
        host="h",
        isolation="none",
    )
    base.update(overrides)
    return EvidenceRecord(**base)  # type: ignore[arg-type]


def test_record_id_is_deterministic_and_covers_the_identifying_fields() -> None:
    a, b = record(), record(status="fail", output="different")
    assert (
        a.record_id == b.record_id == compute_record_id("p:1", "sm_90a", "compile", "abc", "nvcc 13.0.88", "2026-01-01T00:00:00Z")
    )
    assert (
        len(
            {
                a.record_id,
                record(target="sm_100a").record_id,
                record(step="run").record_id,
                record(content_hash="def").record_id,
                record(timestamp="2026-01-02T00:00:00Z").record_id,
                record(toolchain="nvcc 13.1").record_id,
            }
        )
        == 6
    )


def test_jsonl_round_trip_is_lossless_and_idempotent(tmp_path: Path) -> None:
    records = [
        record(),
        record(step="run", status="fail", exit_code=1, resources={"registers": 32}, checks=[{"kind": "output", "ok": False}]),
    ]
    path = tmp_path / "evidence" / "run.jsonl"
    assert write_jsonl(path, records) == 2
    again = read_jsonl(path)
    assert again == records
    write_jsonl(path, again)
    assert read_jsonl(path) == records
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_reading_ignores_unknown_keys_and_names_bad_lines(tmp_path: Path) -> None:
    data = record().to_dict() | {"future_field": 1}
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(data) + "\n\nnot json\n")
    with pytest.raises(ValueError, match=r"e.jsonl:3"):
        read_jsonl(path)
    path.write_text(json.dumps(data) + "\n")
    assert read_jsonl(path)[0] == record()


def test_cache_stores_results_but_not_errors_or_timeouts(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    ok = [StepOutcome(step="compile", status="pass", resources={"registers": 8})]
    key = cache_key("a", "b")
    assert cache.get(key) is None
    assert cache.put(key, ok)
    assert cache.get(key) == ok
    assert not cache.put(cache_key("c"), [StepOutcome(step="compile", status="error")])
    assert not cache.put(cache_key("d"), [StepOutcome(step="run", status="timeout")])
    assert cache.put(cache_key("e"), [StepOutcome(step="compile", status="error")], deterministic=True)
    (tmp_path / key[:2] / f"{key}.json").write_text("{broken")
    assert cache.get(key) is None


def test_cached_outcome_maps_to_the_blocks_current_line() -> None:
    body = "```cuda id=h\nint a;\nint b;\n```\n\n```cuda uses=h\nint c;\n```\n"
    (_, user), _ = extract_snippets("p", "p.md", body, 1, ["sm90a"])
    (_, moved), _ = extract_snippets("p", "p.md", "new\n\nparagraph\n\n" + body, 1, ["sm90a"])
    assert user.content_hash == moved.content_hash
    outcome = StepOutcome(
        step="compile", status="fail", kind="undefined identifier", detail="x", segment="chain-1", segment_line=2
    )
    assert to_record(user, "sm_90a", outcome, "nvcc").error_line == 3
    assert to_record(moved, "sm_90a", outcome, "nvcc").error_line == 7
    own = StepOutcome(step="compile", status="fail", kind="k", detail="y", segment="snippet", segment_line=1)
    r = to_record(moved, "sm_90a", own, "nvcc")
    assert r.error_line == 11 and r.message == "k: y (p.md:11)"


def test_summary_counts_the_worst_step_per_snippet_and_target() -> None:
    records = [
        record(snippet_id="p:1"),
        record(snippet_id="p:1", step="run", status="skipped"),
        record(snippet_id="p:2"),
        record(snippet_id="p:3", status="xfail"),
        record(snippet_id="p:4", status="unverified"),
        record(snippet_id="p:5", status="timeout", step="run"),
        record(snippet_id="p:5"),
        record(snippet_id="p:2", target="sm_100a", status="fail"),
    ]
    summary, totals = summarize(records)
    assert summary["p"]["sm_90a"] == {
        "passed": 1,
        "failed": 1,
        "errors": 0,
        "skipped": 1,
        "unverified": 1,
        "syntax ok": 0,
        "xfail": 1,
    }
    assert summary["p"]["sm_100a"]["failed"] == 1
    assert totals["failed"] == 2
    assert combined_status(["pass", "skipped"]) == "skipped"
    assert combined_status(["xfail"]) == "xfail"


def test_records_carry_the_exact_command_and_older_records_without_it_still_load(tmp_path: Path) -> None:
    new = record(command="/usr/local/bin/nvcc -gencode=arch=compute_90a,code=sm_90a -c snippet.cu -o snippet.o")
    old = {k: v for k, v in record().to_dict().items() if k != "command"}  # written before the field existed
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(new.to_dict()) + "\n" + json.dumps(old) + "\n")
    loaded = read_jsonl(path)
    assert loaded[0].command.startswith("/usr/local/bin/nvcc -gencode=arch=compute_90a")
    assert loaded[1].command == "" and loaded[1].record_id == old["record_id"]
    outcome = StepOutcome.from_dict({"step": "compile", "status": "pass"})  # a cache entry from before the field
    assert outcome.command == ""
