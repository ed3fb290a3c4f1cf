"""Confidence against evidence: lint and the page flag a claim the snippets' evidence does not back."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli.main import cli
from app.evidence.claims import SnippetFacts, claim_problems, measures
from runner.evidence import EvidenceRecord, write_jsonl
from snippets.extract import extract_snippets

PAGE = """---
id: claim-demo
title: Claim demo
type: technique
architectures: [sm90a, sm100a]
confidence: verified
evidence_level: experiment
---
# Claim demo

```cuda run output="OK"
__global__ void k() {}
int main() { k<<<1, 1>>>(); cudaDeviceSynchronize(); printf("OK\\n"); return 0; }
```
"""


def test_verified_needs_every_program_to_have_run_on_a_declared_target() -> None:
    never = SnippetFacts("p:1", "run", {"sm_90a": "skipped", "sm_100a": "skipped"})
    ran = SnippetFacts("p:1", "run", {"sm_90a": "pass", "sm_100a": "skipped"}, ["3.2 us/iter"])
    assert [k for k, _ in claim_problems("verified", "spec", [never])] == ["confidence", "confidence"]
    assert claim_problems("verified", "spec", [ran]) == []
    assert claim_problems("source-reported", "spec", [never]) == []


def test_an_experiment_needs_a_program_whose_output_measures() -> None:
    checks_only = SnippetFacts("p:1", "run", {"sm_90a": "pass"}, ["OK\n"])
    timed = SnippetFacts("p:1", "run", {"sm_90a": "pass"}, ["padded [32][33] load 1-way, 22.4 us/iter, correct\n"])
    assert [k for k, _ in claim_problems("inferred", "experiment", [checks_only])] == ["evidence_level"]
    assert claim_problems("inferred", "experiment", [timed]) == []
    assert measures("1.8 TB/s") and measures("412 cycles") and measures("3.1 TFLOP/s") and measures("53.4 us")
    assert not measures("OK: 16 boxes loaded") and not measures("SMs 132, tiles 20000") and not measures("sm_90a")


def _record(
    snippet, target: str, step: str, status: str, output: str = "", stamp: str = "2026-12-02T10:00:00Z"
) -> EvidenceRecord:
    return EvidenceRecord(
        page_id=snippet.page_id,
        snippet_id=snippet.id,
        path=snippet.path,
        line=snippet.line,
        lang="cuda",
        target=target,
        step=step,
        status=status,
        message="",
        content_hash=snippet.content_hash,
        toolchain="nvcc 13.0.88",
        timestamp=stamp,
        host="h",
        isolation="none",
        mode="run",
        output=output,
    )


def test_lint_reads_the_evidence_and_warns_at_the_claims_line(tmp_path: Path) -> None:
    wiki, evidence = tmp_path / "wiki", tmp_path / "evidence"
    wiki.mkdir()
    evidence.mkdir()
    (wiki / "demo.md").write_text(PAGE, encoding="utf-8")
    (snippet,), _ = extract_snippets("claim-demo", "demo.md", PAGE.split("---\n", 2)[2], 9, ["sm90a", "sm100a"])
    runner = CliRunner()

    result = runner.invoke(cli, ["lint", "--wiki", str(wiki), "--evidence", str(evidence)])
    assert result.exit_code == 0, result.output
    assert "demo.md:6: warning: confidence claims more than the evidence shows" in result.output
    assert "demo.md:7: warning: evidence_level claims more" in result.output

    write_jsonl(
        evidence / "run.jsonl",
        [
            _record(snippet, "sm_90a", "compile", "pass"),
            _record(snippet, "sm_90a", "run", "pass", "OK\n"),
            _record(snippet, "sm_100a", "compile", "pass"),
            _record(snippet, "sm_100a", "run", "skipped"),
        ],
    )
    result = runner.invoke(cli, ["lint", "--wiki", str(wiki), "--evidence", str(evidence)])
    assert "confidence claims more" not in result.output
    assert "demo.md:7: warning: evidence_level claims more" in result.output  # ran, but printed only OK

    write_jsonl(
        evidence / "timed.jsonl", [_record(snippet, "sm_90a", "run", "pass", "k: 2.5 us/iter\nOK\n", "2026-12-02T11:00:00Z")]
    )
    result = runner.invoke(cli, ["lint", "--wiki", str(wiki), "--evidence", str(evidence)])
    assert "claims more" not in result.output, result.output


def test_lint_names_an_unreadable_evidence_line(tmp_path: Path) -> None:
    wiki, evidence = tmp_path / "wiki", tmp_path / "evidence"
    wiki.mkdir()
    evidence.mkdir()
    (wiki / "demo.md").write_text(PAGE, encoding="utf-8")
    (evidence / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["lint", "--wiki", str(wiki), "--evidence", str(evidence)])
    assert result.exit_code == 1
    assert f"{evidence / 'bad.jsonl'}:1: error:" in result.output


def test_the_page_and_its_api_show_the_mismatch(tmp_path: Path) -> None:
    import httpx

    from app.main import create_app
    from app.settings import Settings
    from tests.conftest import LiveServer

    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "demo.md").write_text(PAGE, encoding="utf-8")
    settings = Settings(wiki=wiki, db=f"sqlite:///{tmp_path / 'index.db'}", evidence=tmp_path / "no-evidence")
    with LiveServer(create_app(settings)) as server:
        page = httpx.get(f"{server.url}/api/pages/claim-demo", timeout=30).json()
        html = httpx.get(f"{server.url}/pages/claim-demo", timeout=30).text
    assert [c.split(":")[0] for c in page["claim_problems"]] == ["confidence", "confidence", "evidence_level"]
    assert "Claims vs evidence" in html and "no program of the page measures" in html
