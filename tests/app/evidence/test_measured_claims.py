"""Performance claims bound to measurements: lint fails a claim its newest H200 measurement does not
back within tolerance, keeps claims about GPUs we do not have source-reported, and reports prose
numbers that nothing backs."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli.main import cli
from app.evidence.measured_claims import BoundClaim, check_claims, prose_numbers, read_bound_claims, unavailable
from app.index.perf import read_claims
from runner.evidence import EvidenceRecord, write_jsonl
from snippets.extract import extract_snippets
from snippets.page import parse_page

PAGE = """---
id: claim-bound
title: A measured page
type: hardware
architectures: [sm90]
performance_claims:
  - {gpu: H200, metric: TB/s, value: 4.0, measured_by: "claim-bound:1", metric_key: copy_bw, tolerance: 0.05}
  - {gpu: B200, metric: TFLOPS, value: 1326.11, source_id: blog-x}
---

The copy is measured below.

```cuda run arch=sm_90 output="OK"
int main() { return 0; }
```
"""


def _record(snippet, value: float, stamp: str, gpu: str = "NVIDIA H200", content_hash: str | None = None) -> EvidenceRecord:  # noqa: ANN001
    return EvidenceRecord(
        page_id=snippet.page_id,
        snippet_id=snippet.id,
        path=snippet.path,
        line=snippet.line,
        lang="cuda",
        target="sm_90",
        step="run",
        status="pass",
        message="",
        content_hash=content_hash or snippet.content_hash,
        toolchain="nvcc 13.0.88",
        timestamp=stamp,
        host="h",
        isolation="none",
        mode="run",
        output="OK",
        gpu_name=gpu,
        metrics={
            "clocks": {"nvml": True, "sm_mhz_min": 1980, "sm_mhz_max": 1980, "mem_mhz": 3201},
            "metrics": {"copy_bw": {"value": value, "unit": "B/s", "ci_low": value * 0.99, "ci_high": value * 1.01, "n": 31}},
        },
    )


def _setup(tmp_path: Path):  # noqa: ANN202
    wiki, evidence = tmp_path / "wiki", tmp_path / "evidence"
    wiki.mkdir()
    evidence.mkdir()
    (wiki / "p.md").write_text(PAGE, encoding="utf-8")
    (snippet,), _ = extract_snippets("claim-bound", "p.md", PAGE.split("---\n", 2)[2], 10, ["sm90"])
    return wiki, evidence, snippet


def _lint(wiki: Path, evidence: Path) -> str:
    result = CliRunner().invoke(cli, ["lint", "--wiki", str(wiki), "--evidence", str(evidence)])
    return f"{result.exit_code}\n{result.output}"


def test_a_claim_is_checked_against_its_newest_h200_measurement(tmp_path: Path) -> None:
    wiki, evidence, snippet = _setup(tmp_path)
    out = _lint(wiki, evidence)
    assert "performance_claims[1]: not measured yet" in out and out.startswith("0\n")

    write_jsonl(evidence / "a.jsonl", [_record(snippet, 4.1e12, "2026-12-03T10:00:00Z")])
    out = _lint(wiki, evidence)
    assert "performance_claims[1]" not in out and out.startswith("0\n")  # 2.5% off: within 5%

    # a newer measurement 10% below the claim fails lint; an older one does not count
    write_jsonl(evidence / "b.jsonl", [_record(snippet, 3.6e12, "2026-12-03T11:00:00Z")])
    out = _lint(wiki, evidence)
    assert out.startswith("1\n")
    assert "p.md:6: error: performance_claims[1]: claimed 4 TB/s · measured 3.6 ± 0.036 TB/s on NVIDIA H200, 2026-12-03" in out
    assert "SM 1980-1980 MHz" in out and "more than the tolerance 5%" in out


def test_stale_and_other_gpu_measurements_do_not_count(tmp_path: Path) -> None:
    wiki, evidence, snippet = _setup(tmp_path)
    write_jsonl(
        evidence / "a.jsonl",
        [
            _record(snippet, 4.0e12, "2026-12-03T10:00:00Z", content_hash="0" * 64),  # older code
            _record(snippet, 4.0e12, "2026-12-03T10:00:00Z", gpu="NVIDIA H100 80GB HBM3"),
        ],
    )
    assert "performance_claims[1]: not measured yet" in _lint(wiki, evidence)


def test_a_claim_about_a_gpu_we_do_not_have_stays_source_reported() -> None:
    assert unavailable("B200") and unavailable("NVIDIA H100") and not unavailable("H200")
    sourced = BoundClaim("p", 1, gpu="B200", metric="TFLOPS", value=1326.11, source_id="blog-x")
    measured = BoundClaim("p", 2, gpu="B200", metric="TFLOPS", value=1326.11, measured_by="p:1", metric_key="k")
    bare = BoundClaim("p", 3, gpu="B200", metric="TFLOPS", value=1326.11)
    verdicts = check_claims([sourced, measured, bare], [], {"p:1": "h"})
    assert verdicts[0].severity is None and "source-reported (blog-x); no B200 here" in verdicts[0].message
    assert verdicts[1].severity == "error" and "cannot be measured_by" in verdicts[1].message
    assert verdicts[2].severity == "warning"


def test_malformed_claims_are_errors_naming_the_problem() -> None:
    front = """---
id: p
title: P
type: hardware
performance_claims:
  - {gpu: H200, value: fast}
  - {gpu: H200, value: 1, tolerance: 5}
  - x
  - {gpu: H200, value: 1, measured_by: "p:1"}
  - {gpu: H200, value: 1, measured_by: "not a snippet", metric_key: Bad_Name}
---
"""
    page, _ = parse_page(front.encode(), "p.md")
    assert page is not None
    claims, problems = read_claims(page)  # app/index/perf.py: the one parser
    assert any("item 3 is not a mapping" in p.message for p in problems)
    messages = [v.message for v in check_claims(read_bound_claims(page), [], {})]
    assert "numeric 'value'" in messages[0]
    assert "tolerance must be" in messages[1]
    assert "needs 'metric_key'" in messages[2]
    assert "measured_by must be a snippet id" in messages[3] and "metric_key must be a harness metric name" in messages[3]


def test_prose_numbers_without_source_or_measurement_are_reported() -> None:
    body = (
        "A copy reaches 4.8 TB/s.\n\nThe datasheet gives 4.8 TB/s.\n\n| x | 3 TB/s |\n\n```\n9 TB/s\n```\n\nClaimed 4.1 TB/s.\n"
    )
    assert prose_numbers(body, 10, [4.1]) == [(10, "4.8 TB/s")]


def test_the_service_keeps_validated_metrics_and_refuses_impossible_ones() -> None:
    from app.evidence.ingest import parse_record

    base = {
        "record_id": "r1",
        "snippet_id": "p:1",
        "page_id": "p",
        "target": "sm_90",
        "step": "run",
        "status": "pass",
        "content_hash": "h",
        "timestamp": "2026-12-03T10:00:00Z",
        "gpu_name": "NVIDIA H200",
    }
    doc = {"gpu": {"name": "NVIDIA H200"}, "metrics": {"bw": {"value": 4.0e12, "unit": "B/s", "bound": "hbm"}}}
    rec, problem = parse_record({**base, "metrics": doc})
    assert problem is None and rec is not None and rec.to_record()["metrics"]["metrics"]["bw"]["value"] == 4.0e12
    doc["metrics"]["bw"]["value"] = 9.9e12
    rec, problem = parse_record({**base, "metrics": doc})
    assert rec is None and problem is not None and "peak" in problem
