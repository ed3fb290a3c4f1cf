"""A KernelWiki repository served over HTTP: performance claims (API, filters, page table), the queries/ views, facets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "kwrepo"


@pytest.fixture
def wiki_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(REPO, tmp_path / "repo"))


def test_performance_claims_are_listed_filtered_and_faceted(live) -> None:  # noqa: ANN001
    every = live.get("/api/performance-claims").json()
    assert every["total"] == 2 and every["facets"]["gpu"] == {"B200": 1, "H200": 1}
    h200 = live.get("/api/performance-claims", params={"gpu": "h200"}).json()
    [claim] = h200["items"]
    assert claim["page_id"] == "kernel-tiled-reduction" and claim["value"] == 3900.0 and claim["metric"] == "GB/s"
    assert claim["source_id"] == "blog-demo-pipeline" and claim["source_locator"] == "table 2" and claim["utilization"] == "81%"
    assert live.get("/api/performance-claims", params={"metric": "TFLOPS"}).json()["total"] == 0
    assert live.get("/api/performance-claims", params={"limit": 0}).status_code == 422


def test_a_page_returns_and_shows_its_claims_and_reproducibility(live) -> None:  # noqa: ANN001
    page = live.get("/api/pages/kernel-tiled-reduction").json()
    assert [c["gpu"] for c in page["performance_claims"]] == ["H200", "B200"]
    html = live.get("/pages/kernel-tiled-reduction").text
    assert 'id="h-perf"' in html and "3900" in html and "rows=8192, cols=8192" in html
    assert "<dt>Reproducibility</dt>" in html and "runnable" in html
    listing = live.get("/performance-claims", params={"gpu": "B200"}).text
    assert "6100" in listing and "3900" not in listing


VIEWS = [
    ("by-technique", "pipelining", "pr-demo-lib-7"),
    ("by-hardware-feature", "tma", "kernel-tiled-reduction"),
    ("by-kernel-type", "reduction", "contest-demo-p1"),
    ("by-language", "cute-dsl", "pr-Demo-Lib-9"),
    ("by-repo", "example/demo-lib", "pr-demo-lib-7"),
    ("by-architecture", "blackwell", "pr-Demo-Lib-9"),
    ("by-architecture", "sm90", "hw-bulk-copy"),
    ("by-problem", "low-occupancy", "pattern-low-occupancy"),
]


def test_queries_views_are_generated_from_the_index(live) -> None:  # noqa: ANN001
    for view, group, page in VIEWS:
        data = live.get(f"/api/queries/{view}").json()
        groups = {g["value"]: [p["id"] for p in g["pages"]] for g in data["groups"]}
        assert page in groups[group], (view, group)
        html = live.get(f"/queries/{view}").text
        assert group in html and f"/pages/{page}" in html, (view, group)


def test_by_problem_names_candidate_techniques_and_unknown_views_are_404(live) -> None:  # noqa: ANN001
    data = live.get("/api/queries/by-problem").json()
    [group] = [g for g in data["groups"] if g["value"] == "register-spills"]
    assert group["candidates"]["pattern-low-occupancy"] == [
        {"id": "technique-pipelining", "title": "Multi-stage pipelining", "resolved": True}
    ]
    assert live.get("/api/queries/by-colour").status_code == 404
    assert live.get("/queries/by-colour").status_code == 404
    facets = live.get("/api/facets").json()
    assert facets["techniques"]["pipelining"] == 1 and facets["kernel_types"]["reduction"] == 3
    assert "cute-dsl" in facets["languages"]
    assert "By technique" in live.get("/queries").text


def test_mcp_page_document_carries_the_performance_claims(settings) -> None:  # noqa: ANN001
    from app.agents.documents import page_document
    from app.main import open_store

    store = open_store(settings)
    try:
        store.reindex(settings.wiki)
        text = page_document(store, "kernel-tiled-reduction", "http://x", None)
    finally:
        store.engine.dispose()
    assert text is not None
    front = text.split("---\n")[1]
    assert "performance_claims:" in front and "gpu: H200" in front and "source_locator: table 2" in front
    assert "reproducibility: runnable" in front


def test_fragments_show_as_unverified_with_their_reason_in_the_api_and_the_page(live) -> None:  # noqa: ANN001
    page = live.get("/api/pages/hw-bulk-copy").json()
    fragment = page["snippets"][1]
    assert fragment["mode"] == "fragment" and fragment["status"] == "unverified"
    assert fragment["summary"] == "fragment: not a complete program"
    assert "fragment: not a complete program (unverified)" in live.get("/pages/hw-bulk-copy").text
