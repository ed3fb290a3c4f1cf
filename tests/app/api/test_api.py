"""The REST API over real HTTP: shapes, errors, and hostile input never answering 5xx."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest

from tests.app.evidence_records import tma_record
from tests.app.hostile_input import HOSTILE


def test_search_answers_with_the_documented_shape(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    body = live.get("/api/search", params={"q": "cp.async.bulk"}).json()
    assert set(body) >= {"query", "total", "results", "facets", "did_you_mean", "took_ms"}
    first = body["results"][0]
    assert set(first) >= {"id", "title", "type", "architectures", "score", "section", "snippet"}
    assert first["id"] == "hw-tma" and first["section"] == {"heading": "Loading a tile", "anchor": "loading-a-tile"}
    assert first["architectures"] == ["sm90a", "sm100a"]


def test_search_counts_facets_only_when_asked(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    plain = live.get("/api/search", params={"q": "memory"}).json()
    counted = live.get("/api/search", params={"q": "memory", "facets": "type,arch"}).json()  # not the cached answer
    assert plain["facets"] == {} and set(counted["facets"]) == {"type", "arch"}
    assert sum(counted["facets"]["type"].values()) == counted["total"] == plain["total"]
    refused = live.get("/api/search", params={"q": "memory", "facets": "type,colour"})
    assert refused.status_code == 422 and "colour" in refused.text and "facets" in refused.text


def test_search_filters_and_paging_over_http(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    body = live.get("/api/search", params={"q": "memory", "arch": "sm90", "limit": 1}).json()
    assert [r["id"] for r in body["results"]] == ["hw-tma"] and body["total"] == 1
    assert live.get("/api/search", params={"q": "x", "limit": 0}).status_code == 422


def test_page_has_every_field_rendered_html_links_and_backlinks(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    page = live.get("/api/pages/hw-tma").json()
    assert page["meta"]["reviewed"] == "2026-11-30" and page["meta"]["aliases"] == ["TMA", "UTMALDG", "cp.async.bulk.tensor"]
    assert '<h1 id="loading-a-tile">' in page["html"]
    assert [s["anchor"] for s in page["sections"]] == ["loading-a-tile", "pitfalls"]
    assert {r["id"]: (r["title"], r["resolved"]) for r in page["related"]} == {
        "hw-tmem": ("Tensor Memory (TMEM)", True),
        "hw-mbarrier": ("mbarrier", True),
    }
    assert page["sources"] == [
        {
            "id": "doc-ptx-isa",
            "title": "PTX ISA",
            "resolved": True,
            "type": "source",
            "url": "https://docs.nvidia.com/cuda/parallel-thread-execution/",
        }
    ]
    assert {b["id"] for b in page["backlinks"]} == {"hw-tmem", "hw-mbarrier"}


def test_page_html_escapes_raw_html_and_neutralizes_javascript_links(live, wiki_dir) -> None:
    (wiki_dir / "evil.md").write_text(
        '---\nid: evil\ntitle: "<script>alert(1)</script>"\n---\n<img src=x onerror=alert(1)>\n\n'
        "[click](javascript:alert(1)) [ok](https://example.org)\n"
    )
    live.server.server.config.app.state.store.reindex(wiki_dir)
    page = live.get("/api/pages/evil").json()
    assert "<img" not in page["html"] and "&lt;img" in page["html"]
    assert 'href="javascript:' not in page["html"] and 'href="https://example.org"' in page["html"]


def test_pages_list_resolve_graph_health(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    listing = live.get("/api/pages", params={"type": "hardware"}).json()
    assert listing["total"] == 3 and {p["id"] for p in listing["pages"]} == {"hw-tma", "hw-tmem", "hw-mbarrier"}
    assert live.get("/api/resolve", params={"name": "tmem"}).json()["id"] == "hw-tmem"
    assert live.get("/api/resolve", params={"name": "cp.async.bulk.tensor"}).json()["id"] == "hw-tma"
    graph = live.get("/api/graph").json()
    assert {"source": "hw-tmem", "target": "hw-tma", "kind": "related"} in graph["edges"]
    assert len(graph["nodes"]) == 4
    health = live.get("/api/health").json()
    assert health["status"] == "ok" and health["pages"] == 4


def test_errors_share_one_shape(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    for path, status in [
        ("/api/pages/nope", 404),
        ("/api/resolve?name=nope", 404),
        ("/api/resolve", 422),
        ("/api/search?limit=abc", 422),
        ("/api/nothing", 404),
        ("/api/snippets/x:1/evidence", 404),
    ]:
        response = live.get(path)
        assert response.status_code == status, path
        error = response.json()["error"]
        assert error["status"] == status and error["title"] and "detail" in error


@pytest.mark.parametrize("query", HOSTILE, ids=[repr(q[:20]) for q in HOSTILE])
def test_hostile_queries_never_answer_5xx(shared_live: httpx.Client, query: str) -> None:
    live = shared_live
    for params in ({"q": query}, {"q": "tma", "arch": query[:100]}, {"q": "tma", "tag": query[:100]}):
        response = live.get("/api/search", params=params)
        assert response.status_code in (200, 422), (params, response.text[:200])
    assert live.get("/api/pages/" + quote(query[:300], safe="")).status_code < 500
    assert live.get("/api/resolve", params={"name": query[:300] or "x"}).status_code in (200, 404, 422)


def test_evidence_post_requires_the_runner_token_and_is_idempotent(live) -> None:
    record = tma_record()
    assert live.post("/api/evidence", json=[record]).status_code == 401
    assert live.post("/api/evidence", json=[record], headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert live.get("/api/snippets/hw-tma:1/evidence").json()["records"] == []
    auth = {"Authorization": "Bearer test-runner-token"}
    assert live.post("/api/evidence", json=[record], headers=auth).json()["inserted"] == 1
    again = live.post("/api/evidence", json=[record], headers=auth).json()
    assert again["inserted"] == 0 and again["duplicates"] == 1
    history = live.get("/api/snippets/hw-tma:1/evidence").json()["records"]
    assert len(history) == 1 and history[0]["stale"] is True  # made for other content
    bad = live.post("/api/evidence", json=[{"record_id": "x"}], headers=auth)
    assert bad.status_code == 422 and "missing" in json.dumps(bad.json())
    assert (
        live.post("/api/evidence", content=b"not json", headers={**auth, "content-type": "application/json"}).status_code == 422
    )
