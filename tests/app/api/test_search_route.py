"""The lean `/api/search` route: the declared route's answers, byte for byte, and its refusals left to FastAPI."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from app.api.search import LeanSearch, lean_params
from app.index.filters import Filters

TOOK = re.compile(rb'"took_ms":[0-9.e+-]+')


def test_lean_route_answers_what_the_declared_route_answers(shared_live) -> None:
    live = shared_live  # reads only: one server per backend for the module
    # A repeated parameter is declined by the lean route, so the second request of each pair is FastAPI's.
    for query in (
        "q=cp.async.bulk",
        "q=memory&arch=sm90&limit=1",
        "q=tensor%20memory&limit=2&offset=1",
        "q=tma&tag=TMA&type=hardware",
        "q=memory&facets=type,arch,tag&limit=1",
        "q=memory&facets=tag",
        "q=how%20do%20I%20allocate%20tensor%20memory",
        "q=tensr%20memroy",
        "q=%3Cb%3E%20%22x%22%20%C3%A9t%C3%A9",
        "q=",
    ):
        lean = live.get(f"/api/search?{query}")
        declared = live.get(f"/api/search?{query}&{query.split('&')[0]}")
        assert lean.status_code == declared.status_code == 200, query
        assert lean.headers["content-type"] == declared.headers["content-type"] == "application/json"
        assert TOOK.sub(b"", lean.content) == TOOK.sub(b"", declared.content), query


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("limit=201", "limit"),
        ("offset=-1", "offset"),
        ("tag=" + "x" * 101, "tag"),
        ("budget_tokens=1", "budget_tokens"),
        ("type=nope", "type"),
        ("arch=sm12", "arch"),
        ("facets=type,colour", "facets"),
        ("facets=" + "x" * 101, "facets"),
    ],
)
def test_refused_parameters_keep_the_one_error_shape(shared_live, query: str, parameter: str) -> None:
    response = shared_live.get(f"/api/search?q=tma&{query}")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["status"] == 422 and error["title"] == "Invalid parameters"
    assert ["query", parameter] in [d["loc"] for d in error["detail"]]


def test_lean_route_takes_only_plain_valid_gets() -> None:
    assert lean_params(b"q=wgmma&limit=10&offset=0&arch=sm90a") == ("wgmma", Filters(arch="sm90a"), 10, 0, ())
    assert lean_params(b"") == ("", Filters(), 20, 0, ())
    assert lean_params(b"q=x&type=&unknown=1") == ("x", Filters(), 20, 0, ())  # empty filter: none; unknown names: ignored
    assert lean_params(b"q=x&facets=tag,type,tag") == ("x", Filters(), 20, 0, ("tag", "type"))
    for declined in (
        b"limit=10.0",
        b"limit=+1",
        b"limit=0",
        b"offset=1000001",
        b"q=a&q=b",
        b"budget_tokens=500",
        b"tag=" + b"x" * 101,
        b"facets=type,colour",
    ):
        assert lean_params(declined) is None, declined


async def _through_lean(scope: dict[str, Any]) -> str:
    """What LeanSearch does with a request: 'declined' when it passes it on to the app."""
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append("declined")

    async def send(message: dict[str, Any]) -> None:
        seen.append(str(message.get("status", "body")))

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    await LeanSearch(app)(scope, receive, send)
    return seen[0]


def test_lean_path_passes_on_what_only_the_declared_route_answers() -> None:
    from app.settings import Settings

    class State:
        store: Any = None  # not opened yet: the declared route answers 503 with the reason
        settings = Settings()

    class App:
        state = State()

    scope = {"type": "http", "method": "GET", "path": "/api/search", "query_string": b"q=x", "app": App()}
    for declined in (
        scope,
        {**scope, "method": "HEAD"},
        {**scope, "path": "/api/searchx"},
        {**scope, "query_string": b"limit=abc"},
    ):
        assert asyncio.run(_through_lean(declined)) == "declined", declined


def test_an_error_on_the_lean_path_is_logged_and_answered_once_in_the_one_error_shape(caplog) -> None:  # type: ignore[no-untyped-def]
    """No silent second run through the declared route: the app's own handler answers the failure, once."""
    from fastapi import FastAPI

    from app.errors import install_error_handlers
    from app.settings import Settings

    handled = FastAPI()
    install_error_handlers(handled)

    class Broken:
        engine = None  # no search engine either: answering fails

    class State:
        store = Broken()
        settings = Settings()

    class App:
        state = State()
        exception_handlers = handled.exception_handlers

    scope = {"type": "http", "method": "GET", "path": "/api/search", "query_string": b"q=x", "headers": [], "app": App()}
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            sent.append({"type": "declined"})

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request"}

        await LeanSearch(app)(scope, receive, send)

    with caplog.at_level("WARNING", logger="kernelwiki"):
        asyncio.run(run())
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]  # never passed on to the route
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"] == {
        "status": 500,
        "title": "Internal error",
        "detail": "an unexpected error happened; it has been logged",
    }
    assert any("search failed on /api/search: AttributeError" in r.getMessage() for r in caplog.records)


def test_lean_path_answers_a_plain_search_itself(shared_store) -> None:  # type: ignore[no-untyped-def]
    store = shared_store  # reads only
    from app.settings import Settings

    class State:
        settings = Settings()

    State.store = store  # type: ignore[attr-defined]

    class App:
        state = State()

    scope = {"type": "http", "method": "GET", "path": "/api/search", "query_string": b"q=cp.async.bulk", "app": App()}
    assert asyncio.run(_through_lean(scope)) == "200"  # answered here, not passed on
    assert asyncio.run(_through_lean({**scope, "query_string": b"q=x&type=nope"})) == "declined"  # the 422 is the app's
