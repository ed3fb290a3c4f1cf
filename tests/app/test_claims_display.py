"""Claims bound to measurements, as the page, the API and MCP show them: one claim measured on the
H200 within its tolerance, one outside it (marked), one about a B200 (source-reported), on every
database backend the suite runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.evidence import EvidenceRecord, write_jsonl
from snippets.extract import extract_snippets

BODY = """
The copy and the scale are measured below; the B200 figure is the source's.

```cuda run arch=sm_90 output="OK"
int main() { return 0; }  // copy
```

```cuda run arch=sm_90 output="OK"
int main() { return 0; }  // scale
```
"""
PAGE = (
    """---
id: claims-demo
title: Measured claims demo
type: hardware
architectures: [sm90]
sources: [src-demo]
performance_claims:
  - {gpu: H200, metric: TB/s, value: 4.0, measured_by: "claims-demo:1", metric_key: copy_bw, tolerance: 0.05}
  - {gpu: H200, metric: TB/s, value: 3.0, measured_by: "claims-demo:2", metric_key: scale_bw, tolerance: 0.05}
  - {gpu: B200, metric: TFLOPS, value: 1326.11, source_id: src-demo}
---
"""
    + BODY
)
SOURCE = """---
id: src-demo
title: A demo source
type: source
---

A source page.
"""


def _record(snippet, key: str, value: float) -> EvidenceRecord:  # noqa: ANN001
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
        content_hash=snippet.content_hash,
        toolchain="nvcc 13.0.88",
        timestamp="2026-12-03T10:00:00Z",
        host="h",
        isolation="none",
        mode="run",
        output="OK",
        gpu_name="NVIDIA H200",
        metrics={
            "clocks": {"nvml": True, "sm_mhz_min": 1980, "sm_mhz_max": 1980, "mem_mhz": 3201},
            "metrics": {key: {"value": value, "unit": "B/s", "ci_low": value * 0.99, "ci_high": value * 1.01, "n": 31}},
        },
    )


@pytest.fixture
def wiki_dir(tmp_path: Path) -> Path:
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "claims-demo.md").write_text(PAGE, encoding="utf-8")
    (wiki / "src-demo.md").write_text(SOURCE, encoding="utf-8")
    return wiki


@pytest.fixture
def claims_live(settings, request):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The demo wiki served with an H200 measurement of each bound claim: 4.1 TB/s (2.5% off) and 2.4 TB/s (20% off)."""
    body = PAGE.split("---\n", 2)[2]
    body_line = PAGE[: PAGE.index(body)].count("\n") + 1
    (copy, scale), problems = extract_snippets("claims-demo", "claims-demo.md", body, body_line, ["sm90"])
    assert not problems
    write_jsonl(settings.evidence / "h200.jsonl", [_record(copy, "copy_bw", 4.1e12), _record(scale, "scale_bw", 2.4e12)])
    return request.getfixturevalue("live")


def _check(claims: list[dict]) -> None:
    inside, outside, b200 = claims
    assert inside["state"] == "measured" and inside["measured_by"] == "claims-demo:1" and inside["tolerance"] == 0.05
    m = inside["measurement"]
    assert m["value"] == pytest.approx(4.1) and m["ci"] == pytest.approx(0.041) and m["unit"] == "TB/s"
    assert m["gpu"] == "NVIDIA H200" and m["date"] == "2026-12-03" and m["snippet_id"] == "claims-demo:1"
    assert m["clocks"]["sm_mhz_min"] == 1980 and m["clocks"]["mem_mhz"] == 3201 and m["within_tolerance"] is True
    assert inside["display"] == (
        "claimed 4 TB/s · measured 4.1 ± 0.041 TB/s on NVIDIA H200, 2026-12-03, SM 1980-1980 MHz, memory 3201 MHz"
    )
    assert outside["state"] == "out_of_tolerance" and outside["measurement"]["within_tolerance"] is False
    assert outside["measurement"]["relative_difference"] == pytest.approx(0.2)
    assert b200["state"] == "source_reported" and b200["measurement"] is None
    assert b200["display"] == "source-reported (no B200 here to measure it)"


def test_the_api_returns_each_claim_with_its_measurement(claims_live) -> None:  # noqa: ANN001
    _check(claims_live.get("/api/pages/claims-demo").json()["performance_claims"])
    listing = claims_live.get("/api/performance-claims", params={"page": "claims-demo"}).json()
    _check(listing["items"])
    [h200_outside] = [
        c for c in claims_live.get("/api/performance-claims", params={"gpu": "H200"}).json()["items"] if c["value"] == 3.0
    ]
    assert h200_outside["state"] == "out_of_tolerance"


def test_the_page_shows_claimed_measured_and_marks_the_claim_outside_tolerance(claims_live) -> None:  # noqa: ANN001
    html = claims_live.get("/pages/claims-demo").text
    assert "claimed 4 TB/s · measured 4.1 ± 0.041 TB/s on NVIDIA H200, 2026-12-03, SM 1980-1980 MHz, memory 3201 MHz" in html
    assert "claimed 3 TB/s · measured 2.4 ± 0.024 TB/s on NVIDIA H200" in html
    assert html.count("outside tolerance") == 1 and "off by 20.0%, tolerance 5%" in html
    assert "source-reported (no B200 here to measure it)" in html
    assert 'class="claim-measured claim-out_of_tolerance"' in html
    listing = claims_live.get("/performance-claims").text
    assert "measured 2.4 ± 0.024 TB/s" in listing and "outside tolerance" in listing


def test_a_bound_claim_without_a_run_says_not_measured_yet(live) -> None:  # noqa: ANN001
    claims = live.get("/api/pages/claims-demo").json()["performance_claims"]
    assert [c["state"] for c in claims] == ["not_measured", "not_measured", "source_reported"]
    assert claims[0]["display"] == "not measured yet" and claims[0]["measurement"] is None
    assert "not measured yet" in live.get("/pages/claims-demo").text


def test_mcp_get_page_carries_the_claim_and_its_measurement(settings) -> None:  # noqa: ANN001
    import yaml

    from app.agents.documents import page_document
    from app.main import prepare_store

    body = PAGE.split("---\n", 2)[2]
    body_line = PAGE[: PAGE.index(body)].count("\n") + 1
    (copy, scale), _ = extract_snippets("claims-demo", "claims-demo.md", body, body_line, ["sm90"])
    write_jsonl(settings.evidence / "h200.jsonl", [_record(copy, "copy_bw", 4.1e12), _record(scale, "scale_bw", 2.4e12)])
    store = prepare_store(settings)  # indexes the wiki and loads the evidence folder
    try:
        text = page_document(store.pages, "claims-demo", "http://x", None)
    finally:
        store.engine.dispose()
    assert text is not None
    front = yaml.safe_load(text.split("---\n")[1])
    claims = front["performance_claims"]
    assert claims[0]["measurement"]["within_tolerance"] is True and claims[0]["value"] == 4.0
    assert claims[1]["state"] == "out_of_tolerance" and claims[1]["measurement"]["value"] == pytest.approx(2.4)
    assert claims[2]["state"] == "source_reported" and "measurement" not in claims[2]
