"""A KernelWiki repository served over HTTP: performance claims (API, filters, page table), the queries/ views, facets."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2] / "fixtures" / "kwrepo"


@pytest.fixture
def wiki_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(REPO, tmp_path / "repo"))


@pytest.fixture(scope="module")
def shared_wiki_source() -> Path:
    """What `shared_live` serves here: the repository fixture (the tests that take it only read)."""
    return REPO


def test_performance_claims_are_listed_filtered_and_faceted(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    every = live.get("/api/performance-claims").json()
    assert every["total"] == 2 and every["facets"]["gpu"] == {"B200": 1, "H200": 1}
    h200 = live.get("/api/performance-claims", params={"gpu": "h200"}).json()
    [claim] = h200["items"]
    assert claim["page_id"] == "kernel-tiled-reduction" and claim["value"] == 3900.0 and claim["metric"] == "GB/s"
    assert claim["source_id"] == "blog-demo-pipeline" and claim["source_locator"] == "table 2" and claim["utilization"] == "81%"
    assert live.get("/api/performance-claims", params={"metric": "TFLOPS"}).json()["total"] == 0
    assert live.get("/api/performance-claims", params={"limit": 0}).status_code == 422


def test_a_page_returns_and_shows_its_claims_and_reproducibility(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
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


def test_queries_views_are_generated_from_the_index(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    for view, group, page in VIEWS:
        data = live.get(f"/api/queries/{view}").json()
        groups = {g["value"]: [p["id"] for p in g["pages"]] for g in data["groups"]}
        assert page in groups[group], (view, group)
        html = live.get(f"/queries/{view}").text
        assert group in html and f"/pages/{page}" in html, (view, group)


def test_by_problem_names_candidate_techniques_and_unknown_views_are_404(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
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
        text = page_document(store.pages, "kernel-tiled-reduction", "http://x", None)
    finally:
        store.engine.dispose()
    assert text is not None
    front = text.split("---\n")[1]
    assert "performance_claims:" in front and "gpu: H200" in front and "source_locator: table 2" in front
    assert "reproducibility: runnable" in front


def test_fragments_show_as_unverified_with_their_reason_in_the_api_and_the_page(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    page = live.get("/api/pages/hw-bulk-copy").json()
    fragment = page["snippets"][1]
    assert fragment["mode"] == "fragment" and fragment["status"] == "unverified"
    assert fragment["summary"] == "fragment: not a complete program"
    assert "fragment: not a complete program (unverified)" in live.get("/pages/hw-bulk-copy").text


def ids_of(answer: dict) -> set[str]:  # type: ignore[type-arg]
    return {p["id"] for p in answer.get("pages", answer.get("results", []))}


def test_facet_filters_select_pages_in_the_listing_and_in_search(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    reduction = {"kernel-tiled-reduction", "pr-demo-lib-7", "contest-demo-p1"}
    assert ids_of(live.get("/api/pages", params={"kernel_type": "reduction"}).json()) == reduction
    assert ids_of(live.get("/api/pages", params={"technique": "Pipelining"}).json()) == {"pr-demo-lib-7"}
    both = live.get("/api/pages", params={"hardware_feature": "tma", "kernel_type": "reduction"}).json()
    assert ids_of(both) == {"kernel-tiled-reduction", "pr-demo-lib-7"}
    assert ids_of(live.get("/api/pages", params={"language": "cute-dsl"}).json()) >= {"pr-Demo-Lib-9"}
    found = live.get("/api/search", params={"q": "reduction", "kernel_type": "reduction", "limit": 50}).json()
    assert found["total"] >= 1 and ids_of(found) <= reduction
    copies = live.get("/api/search", params={"q": "copy", "kernel_type": "COPY"}).json()
    assert ids_of(copies) and ids_of(copies) <= {"kernel-copy", "pr-Demo-Lib-9"}
    assert live.get("/api/search", params={"q": "copy", "technique": "pipelining"}).json()["total"] == 0
    html = live.get("/search", params={"q": "reduction", "hardware_feature": "tma"}).text
    assert "/pages/kernel-tiled-reduction" in html and "/pages/contest-demo-p1" not in html
    listing = live.get("/search", params={"kernel_type": "copy"}).text
    assert "/pages/kernel-copy" in listing and "/pages/kernel-tiled-reduction" not in listing


def test_unknown_facet_filter_values_are_a_422_naming_the_parameter(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    for path in ("/api/pages", "/api/search"):
        for name, known in (("technique", "pipelining"), ("hardware_feature", "tma"), ("kernel_type", "reduction")):
            answer = live.get(path, params={"q": "x", name: "no-such-value"})
            assert answer.status_code == 422, (path, name)
            [problem] = answer.json()["error"]["detail"]
            assert problem["loc"] == ["query", name] and "no-such-value" in problem["msg"] and known in problem["allowed"]
    page = live.get("/search", params={"q": "x", "technique": "no-such-value"})
    assert page.status_code == 422 and "technique: there is no value" in page.text
    assert live.get("/api/pages", params={"technique": "x" * 101}).status_code == 422


def test_mcp_search_filters_by_facets_and_names_a_bad_value(settings) -> None:  # noqa: ANN001
    import anyio
    from mcp import Client

    from app.agents.mcp_server import build_server
    from app.main import open_store

    store = open_store(settings)
    try:
        store.reindex(settings.wiki)
        server = build_server(lambda: store, "http://kw")

        async def conversation() -> tuple[str, str, bool]:
            async with Client(server) as client:
                hit = await client.call_tool("search", {"query": "reduction", "technique": "pipelining"})
                miss = await client.call_tool("search", {"query": "reduction", "kernel_type": "sorting"})
            text = "\n".join(getattr(b, "text", "") for b in hit.content)
            return text, "\n".join(getattr(b, "text", "") for b in miss.content), bool(miss.is_error)

        hit, miss, miss_error = anyio.run(conversation)
    finally:
        store.engine.dispose()
    assert "page `pr-demo-lib-7`" in hit and "kernel-tiled-reduction" not in hit
    assert miss_error and "kernel_type: there is no value 'sorting'" in miss


def test_serve_watch_notices_a_change_to_the_data_files(tmp_path: Path) -> None:
    import httpx

    from tests.app.test_serve import Served

    root = Path(shutil.copytree(REPO, tmp_path / "repo"))
    server = Served(tmp_path, "--wiki", str(root), "--db", f"sqlite:///{tmp_path / 'index.db'}", "--watch")
    try:
        assert server.listening(), server.stderr()
        server.wait_ok()
        assert httpx.get(server.url + "/api/resolve", params={"name": "async tile mover"}).status_code == 404
        aliases_file = root / "data" / "aliases.yaml"
        aliases_file.write_text(aliases_file.read_text() + 'tma-extra:\n  - "async tile mover"\n  - TMA\n')
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            found = httpx.get(server.url + "/api/resolve", params={"name": "async tile mover"})
            if found.status_code == 200:
                break
            time.sleep(0.05)
        assert found.status_code == 200 and found.json()["id"] == "hw-bulk-copy", found.text
    finally:
        server.stop()


def test_schema_findings_are_stored_with_the_index_and_shown_on_the_page_and_in_the_api(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: one server per backend for the module
    page = live.get("/api/pages/kernel-copy").json()
    errors = [d["message"] for d in page["problems"] if d["severity"] == "error"]
    assert "missing required field 'performance_claims' for type 'wiki-kernel' (data/schemas.yaml)" in errors
    assert "tag 'not-a-known-tag' is not in data/tags.yaml" in errors
    assert all(isinstance(d["line"], int) and d["line"] >= 1 for d in page["problems"])
    pr9 = live.get("/api/pages/pr-Demo-Lib-9").json()
    assert any(d["message"].startswith("'merge_sha' is required when status == merged") for d in pr9["problems"])
    html = live.get("/pages/kernel-copy").text
    assert "Schema and lint findings" in html and "missing required field &#39;performance_claims&#39;" in html
    assert live.get("/api/pages/kernel-tiled-reduction").json()["problems"] == []


def test_a_pages_file_is_named_as_the_repository_names_it(shared_live) -> None:  # noqa: ANN001
    """Under a KernelWiki root a page's stored path is already the repository's (`wiki/…`, `sources/…`): the
    Markdown's `file:`, the API, the page and search show it as it is, and `/wiki/{path}` is a file under wiki/."""
    live = shared_live  # reads only: one server per backend for the module
    files = {
        "hw-bulk-copy": "wiki/hardware/bulk-copy.md",
        "pr-demo-lib-7": "sources/prs/demo-lib/PR-7.md",
    }
    for page_id, file in files.items():
        markdown = live.get(f"/pages/{page_id}.md").text
        assert f"\nfile: {file}\n" in markdown.split("---\n")[1], page_id
        assert live.get(f"/api/pages/{page_id}").json()["file"] == file
        assert f"<code>{file}</code>" in live.get(f"/pages/{page_id}").text
    assert "wiki/hardware/bulk-copy.md</code>" in live.get("/search", params={"q": "bulk tensor copies"}).text
    by_file = live.get("/wiki/hardware/bulk-copy.md")
    assert by_file.status_code == 200 and '<link rel="canonical" href="/pages/hw-bulk-copy">' in by_file.text
    assert live.get("/wiki/hardware/bulk-copy").status_code == 200
    assert live.get("/wiki/wiki/hardware/bulk-copy.md").status_code == 404
