"""`GET /api/search`: ranked section-level search with filters and facets, and its lean path (`LeanSearch`)."""

from __future__ import annotations

import logging
from typing import Annotated, cast

from fastapi import APIRouter, FastAPI, Query, Request
from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.agents.budget import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, budgeted
from app.deps import (
    FILTER_NAMES,
    LIMIT_MAX,
    OFFSET_MAX,
    PARAMETER_MAX_CHARS,
    ConnDep,
    FacetsDep,
    FiltersDep,
    Limit,
    Offset,
    PagesDep,
    SearchDep,
    SettingsDep,
    caught_up,
    request_connection,
)
from app.index.filters import Filters
from app.schemas import SearchPublic
from app.search import parse_facets

router = APIRouter(prefix="/api", tags=["search"])
log = logging.getLogger("kernelwiki")
LIMIT_DEFAULT = 20
"""Results per answer when the request names no `limit` (the declared route and the lean path)."""


@router.get("/search", response_model=SearchPublic)
async def search(
    request: Request,
    searcher: SearchDep,
    pages: PagesDep,
    conn: ConnDep,
    settings: SettingsDep,
    filters: FiltersDep,
    facets: FacetsDep,
    q: Annotated[str, Query(description="free text; GPU identifiers such as cp.async.bulk are words")] = "",
    limit: Limit = LIMIT_DEFAULT,
    offset: Offset = 0,
    budget_tokens: Annotated[
        int | None,
        Query(
            ge=MIN_BUDGET_TOKENS,
            le=MAX_BUDGET_TOKENS,
            description="also answer with the best sections' Markdown within about this many tokens, ceil(characters / 4), in `context`",
        ),
    ] = None,
) -> SearchPublic:
    # On the event loop: an uncached search is ~1.3 ms of CPU at 10,000 pages. tantivy releases the GIL while it
    # searches (about 40% of that), but handing searches to threads measured slower under load (2026-12-03: 2 or 1
    # pool threads, 450-500 req/s against ~560 inline): the Python around them serialises on the GIL.
    await caught_up(searcher)  # off the event loop: a first opening may build the host's index for a minute
    result = searcher.search(
        q, filters, limit=limit, offset=offset, max_chars=settings.search_max_query_chars, facets=facets, sync=False
    )
    if budget_tokens is not None:
        result.context = budgeted(pages, result, budget_tokens, str(request.base_url), conn=conn)
    return result


# -- the lean path -------------------------------------------------------------------------------------------------
# FastAPI's per-request work for the route above (solving 5 dependencies and 9 query parameters, validating the
# answer against `response_model`) and Starlette's (exception middleware, routing through every route, the Request
# and Response objects) cost several times the search itself: a cached answer took ~300 us through that stack and
# ~50 us without it. `LeanSearch` is a pure ASGI middleware that answers the common request itself (GET, valid
# integers in range, known filter values, no budget): parameters parsed once, one connection from the same bounded
# checkout, the answer serialised once by pydantic. Every other request (a parameter FastAPI would refuse, a
# repeated parameter, `budget_tokens`, an unknown filter value, no index yet) goes on to the app, so the declared
# route answers it exactly as before (and its error shape), and that route is what the OpenAPI schema describes.
# The bounds, the filter names and the length cap are app/deps.py's, which the declared route's parameters use too.
# An error while the lean path answers is logged and answered once, by the app's own handlers (the one error
# shape): the search is never run a second time.

_KNOWN = frozenset(("q", "limit", "offset", "budget_tokens", "facets", *FILTER_NAMES))
PATH = "/api/search"


def _integer(value: str | None, default: int, low: int, high: int) -> int | None:
    """Plain decimal digits within [low, high]; None for anything FastAPI should judge (and refuse or coerce)."""
    if value is None:
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    number = int(value)
    return number if low <= number <= high else None


def lean_params(query_string: bytes) -> tuple[str, Filters, int, int, tuple[str, ...]] | None:
    """(q, filters, limit, offset, facets) when the lean route may answer, else None (the declared route answers)."""
    params = QueryParams(query_string)
    values: dict[str, str] = {}
    for key, value in params.multi_items():
        if key in _KNOWN:
            if key in values:
                return None  # repeated: leave the choice to FastAPI
            values[key] = value
    if "budget_tokens" in values:
        return None
    limit = _integer(values.get("limit"), LIMIT_DEFAULT, 1, LIMIT_MAX)
    offset = _integer(values.get("offset"), 0, 0, OFFSET_MAX)
    if limit is None or offset is None or len(values.get("facets", "")) > PARAMETER_MAX_CHARS:
        return None
    try:
        facets = parse_facets(values.get("facets", ""))
    except ValueError:
        return None
    chosen: dict[str, str | None] = {}
    for name in FILTER_NAMES:
        given = values.get(name)
        if given is not None and len(given) > PARAMETER_MAX_CHARS:
            return None
        chosen[name] = given or None
    return values.get("q", ""), Filters(**chosen), limit, offset, facets


class LeanSearch:
    """Pure ASGI middleware: answers a plain `GET /api/search` itself, passes everything else to the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == PATH:
            try:
                body = await lean_answer(scope)
            except Exception as exc:  # answered once, as the app answers any error there (never searched again)
                response = await _error_answer(scope, exc)
                await response(scope, receive, send)
                return
            if body is not None:
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def lean_answer(scope: Scope) -> bytes | None:
    """The declared route's JSON answer to this request, or None when only the declared route may answer it."""
    parsed = lean_params(scope.get("query_string", b""))
    app = scope.get("app")
    store = getattr(app.state, "store", None) if app is not None else None  # the services' wiring (app/store.py)
    if parsed is None or store is None:
        return None
    q, filters, limit, offset, facets = parsed
    max_chars = app.state.settings.search_max_query_chars  # type: ignore[union-attr]  # store is None when app is
    searcher = store.searcher
    await caught_up(searcher)  # when due, in a thread of its own: the event loop never waits on the full-text index
    if filters.as_params():  # the database is asked something: one connection
        async with request_connection(Request(scope), store.engine) as conn:
            if searcher.filter_problems(filters, conn=conn, sync=False):
                return None  # the declared route names them in its 422
    result = searcher.search(q, filters, limit=limit, offset=offset, max_chars=max_chars, facets=facets, sync=False)
    return result.model_dump_json().encode()


async def _error_answer(scope: Scope, exc: Exception) -> Response:
    """The app's answer to `exc` (its exception handlers: the one error shape, a damaged index's 503), logged once."""
    log.warning("search failed on %s: %s: %s", PATH, type(exc).__name__, exc)
    handlers = getattr(scope.get("app"), "exception_handlers", {})
    handler = next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)
    if handler is None:
        raise exc  # no app handlers (not a FastAPI app): the server's own error answer
    return cast(Response, await handler(Request(scope), exc))


def install(app: FastAPI) -> None:
    """Put the lean path in front of the routes (the declared one stays for the schema and for what it declines)."""
    app.add_middleware(LeanSearch)
