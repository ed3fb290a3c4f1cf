"""Listings page in SQL: /api/pages and /api/snippets windows with exact totals and `next`, the bounded graph."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs


def test_pages_are_paged_with_exact_total_and_next(live: Any) -> None:
    whole = live.get("/api/pages", params={"limit": 200}).json()
    assert whole["total"] == len(whole["pages"]) and whole["next"] is None
    first = live.get("/api/pages", params={"limit": 2}).json()
    assert first["total"] == whole["total"] and len(first["pages"]) == 2
    assert parse_qs(first["next"]) == {"limit": ["2"], "offset": ["2"]}
    second = live.get("/api/pages?" + first["next"]).json()
    assert [p["id"] for p in first["pages"] + second["pages"]] == [p["id"] for p in whole["pages"]][:4]
    assert whole["facets"]["type"]["hardware"] == 3 and sum(whole["facets"]["type"].values()) == whole["total"]


def test_page_facets_count_the_filtered_pages(live: Any) -> None:
    body = live.get("/api/pages", params={"arch": "sm90"}).json()
    assert body["total"] == len(body["pages"]) >= 1
    assert body["facets"]["arch"]["sm90"] == body["total"]
    assert sum(body["facets"]["type"].values()) == body["total"]


def test_snippets_are_a_window_with_total_and_next(live: Any, wiki_dir: Any) -> None:
    (wiki_dir / "many.md").write_text(
        "---\nid: many\ntitle: Many snippets\ntype: technique\narchitectures: [sm90a]\n---\n"
        + "".join(f"\n```cuda\n__global__ void k{i}() {{}}\n```\n" for i in range(5))
    )
    live.server.server.config.app.state.store.reindex(wiki_dir)
    body = live.get("/api/snippets", params={"page": "many", "limit": 2}).json()
    assert body["total"] == 5 and [s["id"] for s in body["snippets"]] == ["many:1", "many:2"]
    rest = live.get("/api/snippets?" + body["next"]).json()
    assert [s["id"] for s in rest["snippets"]] == ["many:3", "many:4"] and rest["total"] == 5
    assert live.get("/api/snippets", params={"target": "sm_90a", "page": "many"}).json()["total"] == 5
    assert live.get("/api/snippets", params={"target": "sm_9%", "page": "many"}).json()["total"] == 0
    unknown = live.get("/api/snippets", params={"status": "unknown", "page": "many", "limit": 1}).json()
    assert unknown["total"] == 5 and len(unknown["snippets"]) == 1 and unknown["snippets"][0]["status"] == "unknown"
    assert live.get("/api/snippets", params={"status": "pass", "page": "many"}).json()["total"] == 0


def test_graph_is_the_most_linked_pages_or_a_neighbourhood(live: Any) -> None:
    top = live.get("/api/graph", params={"limit": 2}).json()
    assert len(top["nodes"]) == 2 and top["total_nodes"] == 4
    degrees = [n["degree"] for n in top["nodes"]]
    assert degrees == sorted(degrees, reverse=True) and top["nodes"][0]["id"] == "hw-tma"
    ids = {n["id"] for n in top["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in top["edges"])
    near = live.get("/api/graph", params={"page": "hw-mbarrier"}).json()
    assert near["nodes"][0]["id"] == "hw-mbarrier" and {"hw-tma"} <= {n["id"] for n in near["nodes"]}
    assert live.get("/api/graph", params={"page": "no-such-page"}).status_code == 404
    assert live.get("/api/graph", params={"depth": 9}).status_code == 422


def test_status_index_follows_new_evidence_like_a_fresh_build(store: Any, wiki_dir: Any) -> None:
    from app.evidence.status import build_status_index, data_version
    from bench.records import record

    (wiki_dir / "many.md").write_text(
        "---\nid: many\ntitle: Many snippets\ntype: technique\narchitectures: [sm90a]\n---\n"
        + "".join(f"\n```cuda\n__global__ void k{i}() {{}}\n```\n" for i in range(3))
    )
    store.reindex(wiki_dir)
    with store.engine.connect() as conn:
        before = store.status_index(conn)
        snippets = [s.model_dump() for s in store.evidence.snippets_with_evidence(conn, page_id="many")]
    assert {s.status for s in before.snippets if s.page_id == "many"} == {"unknown"}
    store.evidence.add([record(snippets[0], "sm_90a", "compile", "pass"), record(snippets[1], "sm_90a", "compile", "fail")])
    with store.engine.connect() as conn:
        after = store.status_index(conn)
        fresh = build_status_index(conn, store.evidence, data_version(conn))
    assert after is not before and after.snippets == fresh.snippets and after.evidence_count == fresh.evidence_count == 2
    assert {s.id: s.status for s in after.snippets if s.page_id == "many"} == {
        "many:1": "pass",
        "many:2": "fail",
        "many:3": "unknown",
    }
