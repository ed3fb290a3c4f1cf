"""Listings page in SQL: /api/pages and /api/snippets windows with exact totals and `next`, the bounded graph."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs


def _walk(live: Any, path: str, params: dict[str, Any], items: str) -> list[list[str]]:
    """Every window of a listing, following each answer's `next` from the first; the ids of each."""
    answer = live.get(path, params=params).json()
    windows = [[x["id"] for x in answer[items]]]
    while answer["next"] is not None:
        assert set(parse_qs(answer["next"])) == {*params, "next"}, answer["next"]  # the filters carry over
        answer = live.get(f"{path}?{answer['next']}").json()
        assert answer["offset"] is None  # a window after a token: where it starts is not counted
        windows.append([x["id"] for x in answer[items]])
    return windows


def test_pages_are_paged_with_exact_total_and_a_keyset_next_token(shared_live: Any) -> None:
    live = shared_live  # reads only: one server per backend for the module
    whole = live.get("/api/pages", params={"limit": 200}).json()
    assert whole["total"] == len(whole["pages"]) == 4 and whole["next"] is None and whole["offset"] == 0
    windows = _walk(live, "/api/pages", {"limit": 2}, "pages")
    assert [len(w) for w in windows[:-1]] == [2] * (len(windows) - 1) and 1 <= len(windows[-1]) <= 2
    assert sum(windows, []) == [p["id"] for p in whole["pages"]]  # every page once, in order
    hardware = _walk(live, "/api/pages", {"limit": 1, "type": "hardware"}, "pages")
    assert len(hardware) == 3 and all(live.get(f"/api/pages/{w[0]}").json()["type"] == "hardware" for w in hardware)
    second = live.get("/api/pages", params={"limit": 2, "offset": 2}).json()  # an offset still jumps
    assert [p["id"] for p in second["pages"]] == windows[1] and second["offset"] == 2
    assert whole["facets"]["type"]["hardware"] == 3 and sum(whole["facets"]["type"].values()) == whole["total"]


def test_a_next_token_that_is_not_ours_or_comes_with_an_offset_is_a_422_naming_next(shared_live: Any) -> None:
    live = shared_live  # reads only: one server per backend for the module
    token = parse_qs(live.get("/api/pages", params={"limit": 1}).json()["next"])["next"][0]
    for path in ("/api/pages", "/api/snippets"):
        deep = base64.urlsafe_b64encode(b"[" * 1490).decode()  # json's recursion limit, inside TOKEN_MAX_CHARS
        for params in (
            {"next": "bm90IG91cnM"},
            {"next": "!!"},
            {"next": token, "offset": 1},
            {"next": "W1sxXV0"},
            {"next": deep},
        ):
            answer = live.get(path, params=params)
            [problem] = answer.json()["error"]["detail"]
            assert answer.status_code == 422 and problem["loc"] == ["query", "next"], (path, params)


def test_page_facets_count_the_filtered_pages(shared_live: Any) -> None:
    live = shared_live  # reads only: one server per backend for the module
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
    assert _walk(live, "/api/snippets", {"page": "many", "limit": 2}, "snippets") == [
        ["many:1", "many:2"],
        ["many:3", "many:4"],
        ["many:5"],
    ]
    assert live.get("/api/snippets", params={"target": "sm_90a", "page": "many"}).json()["total"] == 5
    assert live.get("/api/snippets", params={"target": "sm_9%", "page": "many"}).json()["total"] == 0
    unknown = live.get("/api/snippets", params={"status": "unknown", "page": "many", "limit": 1}).json()
    assert unknown["total"] == 5 and len(unknown["snippets"]) == 1 and unknown["snippets"][0]["status"] == "unknown"
    assert live.get("/api/snippets", params={"status": "pass", "page": "many"}).json()["total"] == 0


def test_graph_is_the_most_linked_pages_or_a_neighbourhood(shared_live: Any) -> None:
    live = shared_live  # reads only: one server per backend for the module
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


def _stored_against_rule(store: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the index stores, what runner/status.py's rules say now) for every snippet: status and dashboard lines."""
    from sqlalchemy import text

    from app.evidence.store import status_lines

    with store.engine.connect() as conn:
        judged = store.evidence.snippets_with_evidence(conn)  # the rules (summarize_snippet) applied afresh
        stored = dict(conn.execute(text("SELECT id, status FROM snippet")).all())
        lines: dict[str, set[tuple[str, str]]] = {}
        for sid, target, status in conn.execute(text("SELECT snippet_id, target, status FROM snippet_target")):
            lines.setdefault(sid, set()).add((target, status))
    rule = {s.id: s.status for s in judged}
    rule_lines = {s.id: set(status_lines(s)) for s in judged}
    return {"status": stored, "lines": lines}, {"status": rule, "lines": rule_lines}


def test_stored_statuses_follow_the_rules_after_ingest_reindex_and_stale_evidence(store: Any, wiki_dir: Any) -> None:
    from bench.records import record

    page = wiki_dir / "many.md"
    head = "---\nid: many\ntitle: Many snippets\ntype: technique\narchitectures: [sm90a, sm100a]\n---\n"
    page.write_text(head + "".join(f"\n```cuda\n__global__ void k{i}() {{}}\n```\n" for i in range(3)))
    store.reindex(wiki_dir)
    stored, rule = _stored_against_rule(store)
    assert stored == rule and {stored["status"][f"many:{i}"] for i in (1, 2, 3)} == {"unknown"}
    with store.engine.connect() as conn:
        snippets = [s.model_dump() for s in store.evidence.snippets_with_evidence(conn, page_id="many")]

    # ingest: a pass on one target only (partial), a failure, a stale record on a third; other targets untouched
    store.evidence.add(
        [
            record(snippets[0], "sm_90a", "compile", "pass"),
            record(snippets[1], "sm_90a", "compile", "fail"),
            record(snippets[2], "sm_90a", "compile", "pass", stale=True),
            record(snippets[2], "sm_80", "compile", "pass"),  # a target the block does not declare: a line of its own
        ]
    )
    stored, rule = _stored_against_rule(store)
    assert stored == rule
    assert [stored["status"][f"many:{i}"] for i in (1, 2, 3)] == ["partial", "fail", "stale"]
    assert ("sm_80", "pass") in stored["lines"]["many:3"]

    store.evidence.add([record(snippets[0], "sm_100a", "compile", "pass")])
    stored, rule = _stored_against_rule(store)
    assert stored == rule and stored["status"]["many:1"] == "pass"

    # a reindex that changes the first snippet's code: its passes are now stale; the others keep theirs
    page.write_text(page.read_text().replace("void k0() {}", "void k0() { return; }"))
    report = store.reindex(wiki_dir)
    assert report.updated == ["many"]
    stored, rule = _stored_against_rule(store)
    assert stored == rule and [stored["status"][f"many:{i}"] for i in (1, 2, 3)] == ["stale", "fail", "stale"]

    # the page loses its third block and turns the second into a sketch
    page.write_text(head + "\n```cuda\n__global__ void k0() { return; }\n```\n\n```cuda sketch\n__global__ void k1() {}\n```\n")
    store.reindex(wiki_dir)
    stored, rule = _stored_against_rule(store)
    assert stored == rule and "many:3" not in stored["status"] and "many:3" not in stored["lines"]
    assert stored["status"]["many:2"] == "unverified" and stored["lines"]["many:2"] == {("—", "unverified")}


def test_statuses_the_parse_workers_write_are_what_judging_in_sql_stores(db_url: str) -> None:
    """A reindex writes each snippet's status without evidence with its row (app/evidence/store.py
    `status_without_evidence`, in the parse workers) and judges in SQL only snippets that records name:
    judging every snippet again (`refresh_statuses`) changes no status and no dashboard line."""
    from pathlib import Path

    from app.store import Store

    store = Store(db_url)
    store.create_schema()
    store.reindex(Path(__file__).parents[3] / "wiki", full_text=False)  # the bundled wiki: blocks of every mode

    def rows(conn: Any) -> tuple[list[Any], list[Any]]:
        statuses = sorted(tuple(r) for r in conn.exec_driver_sql("SELECT id, status FROM snippet"))
        lines = sorted(
            tuple(r)
            for r in conn.exec_driver_sql(
                "SELECT snippet_id, page_id, position, target, target_order, status, status_rank FROM snippet_target"
            )
        )
        return statuses, lines

    with store.engine.begin() as conn:
        before = rows(conn)
        assert len(before[0]) > 10 and None not in {status for _, status in before[0]}
        assert len({status for _, status in before[0]}) >= 2  # built blocks (unknown) and never-built ones (unverified)
        store.evidence.refresh_statuses(conn, [sid for sid, _ in before[0]])
        assert rows(conn) == before
    store.engine.dispose()


def test_an_index_from_before_stored_statuses_is_judged_when_the_schema_is_made(store: Any) -> None:
    from sqlalchemy import text

    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE snippet SET status = NULL")
        conn.exec_driver_sql("DELETE FROM snippet_target")
    store.create_schema()
    stored, rule = _stored_against_rule(store)
    assert stored == rule and stored["status"] and None not in stored["status"].values()
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM snippet_target")).scalar()


def test_an_evidence_post_rebuilds_nothing_the_views_read(live: Any) -> None:
    """Issue 26: a post stores the statuses it changes in its own transaction (app/evidence/store.py), so the views
    after it read no more than they did warm: no status index, facets, graph or llms.txt is built again (on
    PostgreSQL a post once made the next home and dashboard request rebuild a status index of every snippet)."""
    from sqlalchemy import event

    app = live.server.server.config.app
    engine = app.state.store.engine
    views = ["/", "/evidence", "/api/snippets?limit=20", "/api/pages", "/graph", "/api/graph", "/llms.txt"]
    assert app.state.warm_done.wait(60)  # the start-up warm-up's statements are not the views'
    for view in views:  # the first requests fill the caches
        assert live.get(view, headers={"accept": "text/html"}).status_code == 200, view
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    def read(view: str) -> tuple[int, str]:
        statements.clear()
        response = live.get(view, headers={"accept": "text/html"})
        assert response.status_code == 200, view
        return len(statements), response.text

    event.listen(engine, "before_cursor_execute", count)
    try:
        warm = {view: read(view)[0] for view in views}
        renderings = app.state.agent_documents.renderings
        snippet = live.get("/api/snippets", params={"page": "hw-tma", "limit": 1}).json()["snippets"][0]
        before = live.get("/api/snippets", params={"status": "pass", "limit": 1}).json()["total"]
        records = [
            {
                "record_id": f"no-rebuild-{target}-{step}",
                "snippet_id": snippet["id"],
                "page_id": "hw-tma",
                "target": target,
                "step": step,
                "status": "pass",
                "content_hash": snippet["content_hash"],
                "timestamp": "2026-12-01T00:00:00Z",
            }
            for target in snippet["targets"]
            for step in ("compile", "run")
        ]
        posted = live.post("/api/evidence", json=records, headers={"Authorization": "Bearer test-runner-token"})
        assert posted.status_code == 200 and posted.json()["inserted"] == len(records), posted.text
        after = {view: read(view) for view in views}
    finally:
        event.remove(engine, "before_cursor_execute", count)
    # The post took effect where statuses show: the snippet passes now.
    assert live.get("/api/snippets", params={"status": "pass", "limit": 1}).json()["total"] == before + 1
    assert {view: n for view, (n, _) in after.items()} == warm  # the same statements as warm: nothing rebuilt
    assert app.state.agent_documents.renderings == renderings  # llms.txt is kept per index generation, not per post
