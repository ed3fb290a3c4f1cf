"""`GET /api/search`: ranked section-level search with filters and facets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from app.budget import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, budgeted
from app.deps import ConnDep, FacetsDep, FiltersDep, Limit, Offset, SettingsDep, StoreDep, check_filters, request_connection
from app.schemas import SearchPublic
from app.search import parse_facets
from app.store import Filters

router = APIRouter(prefix="/api", tags=["search"])


@router.get("/search", response_model=SearchPublic)
async def search(
    request: Request,
    store: StoreDep,
    conn: ConnDep,
    settings: SettingsDep,
    filters: FiltersDep,
    facets: FacetsDep,
    q: Annotated[str, Query(description="free text; GPU identifiers such as cp.async.bulk are words")] = "",
    limit: Limit = 20,
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
    # On the event loop: a search is ~2 ms of CPU (tantivy) and one indexed SQL row; a worker-thread hop costs more
    # than that under load, and threads add no parallelism to CPU-bound Python.
    result = store.search(
        q, filters, limit=limit, offset=offset, max_chars=settings.search_max_query_chars, conn=conn, facets=facets
    )
    if budget_tokens is not None:
        result.context = budgeted(store, result, budget_tokens, str(request.base_url), conn=conn)
    return result


# -- the lean route ------------------------------------------------------------------------------------------------
# FastAPI's per-request work for the route above (solving 5 dependencies and 9 query parameters, validating the
# answer against `response_model`) cost more CPU than the search itself. `install` puts a plain Starlette route in
# front of it that answers the common request (valid integers in range, no budget) itself: parameters parsed once,
# one connection from the same bounded checkout, the answer serialised once by pydantic. Every other request (a
# parameter FastAPI would refuse, a repeated parameter, `budget_tokens`, no index yet) is declined in `matches`, so
# the declared route answers it exactly as before, and that declared route is what the OpenAPI schema describes.

FILTER_NAMES = ("type", "arch", "tag", "language", "confidence")
_FILTER_MAX = 100
_KNOWN = frozenset(("q", "limit", "offset", "budget_tokens", "facets", *FILTER_NAMES))
_SCOPE_KEY = "kernelwiki.search"


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
    limit = _integer(values.get("limit"), 20, 1, 200)
    offset = _integer(values.get("offset"), 0, 0, 1_000_000)
    if limit is None or offset is None or len(values.get("facets", "")) > _FILTER_MAX:
        return None
    try:
        facets = parse_facets(values.get("facets", ""))
    except ValueError:
        return None
    chosen: dict[str, str | None] = {}
    for name in FILTER_NAMES:
        given = values.get(name)
        if given is not None and len(given) > _FILTER_MAX:
            return None
        chosen[name] = given or None
    return values.get("q", ""), Filters(**chosen), limit, offset, facets


class LeanSearchRoute(Route):
    """`GET /api/search` without FastAPI's per-request machinery; declines what only the declared route answers."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("method") != "GET":  # HEAD and the rest: the declared route answers (and refuses) them
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.FULL:
            return match, child
        app = scope.get("app")
        parsed = lean_params(scope.get("query_string", b""))
        if parsed is None or app is None or getattr(app.state, "store", None) is None:
            return Match.NONE, {}
        child[_SCOPE_KEY] = parsed
        return match, child


async def lean_search(request: Request) -> Response:
    """The declared route's answer for a request `LeanSearchRoute.matches` accepted."""
    q, filters, limit, offset, facets = request.scope[_SCOPE_KEY]
    state: Any = request.app.state
    store = state.store
    async with request_connection(request, store) as conn:
        check_filters(store, filters, conn)
        result = store.search(
            q, filters, limit=limit, offset=offset, max_chars=state.settings.search_max_query_chars, conn=conn, facets=facets
        )
    return Response(result.model_dump_json(), media_type="application/json")


def install(app: FastAPI) -> None:
    """Put the lean route in front of the declared one (which stays for the schema and for what the lean one declines)."""
    app.router.routes.insert(0, LeanSearchRoute("/api/search", lean_search, methods=["GET"], include_in_schema=False))
