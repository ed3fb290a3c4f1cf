"""FastAPI dependencies: the concern services, settings and connection of the running app (no globals).

A route asks for the services it needs (`PagesDep`, `SearchDep`, `EvidenceDep`, `HealthDep`) and the request's one
connection (`ConnDep`); the `Store` on `app.state` only wires them (app/store.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import fields
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.engine import Connection, Engine
from starlette.concurrency import run_in_threadpool

from app import keyset
from app.evidence.store import EvidenceStore
from app.health import Health
from app.index.filters import Filters
from app.pages import Pages
from app.search import FACETS, Searcher, parse_facets
from app.search.searcher import CATCH_UP_WAIT_S
from app.settings import Settings
from app.store import Store


def app_store(request: Request) -> Store:
    """The app's services; 503 (with the reason) while the index cannot be opened."""
    store = request.app.state.store
    if store is None:
        status = getattr(request.app.state, "index_status", None)
        reason = getattr(status, "problem", None) or "the index is being opened"
        raise HTTPException(503, reason, headers={"Retry-After": "5"})
    return store


# The services as dependencies: async because they never block (a sync one costs a threadpool hop per request).


async def get_pages(request: Request) -> Pages:
    return app_store(request).pages


async def get_searcher(request: Request) -> Searcher:
    return app_store(request).searcher


async def get_evidence(request: Request) -> EvidenceStore:
    return app_store(request).evidence


async def get_health(request: Request) -> Health | None:
    """None while there is no index to count (never a 503: `/api/health` says why itself)."""
    store = request.app.state.store
    return store.health if store is not None else None


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_conn(request: Request) -> AsyncIterator[Connection]:
    """The request's one database connection, passed down to every service call it makes.

    Checked out once per request and given back when the request ends, so a
    request never waits on the pool for a second connection while holding one.
    An async generator so the connection goes back even when the client hangs up
    mid-request: a sync generator's cleanup is sent to a worker thread, which a
    cancelled request never gets, and 64 clients that disconnect at once then
    leaked the whole pool (every later request waited 30 s and failed).
    """
    async with request_connection(request, app_store(request).engine) as conn:
        yield conn


@asynccontextmanager
async def request_connection(request: Request, engine: Engine) -> AsyncIterator[Connection]:
    """`get_conn`'s checkout, for routes served without FastAPI's dependencies (app/api/search.py's lean route)."""
    slots = _pool_slots(request, engine)
    taken: list[Connection] = []  # filled in the worker thread, so a checkout finished after a hang-up is still closed

    def checkout() -> None:
        taken.append(engine.connect())

    await slots.acquire()  # waits on the event loop, never in a worker thread (threads blocked on the pool deadlocked it)
    try:
        if _idle_connections(engine) > 0:
            checkout()  # an open connection is waiting in the pool: taking it costs less than a worker-thread hop
        else:
            await run_in_threadpool(checkout)  # opening one may block; a slot guarantees the pool never makes it wait
        yield taken[0]
    finally:
        for conn in taken:
            conn.close()
        slots.release()


def _idle_connections(engine: Engine) -> int:
    """Open connections waiting in the pool (0 when the pool cannot say)."""
    checkedin = getattr(engine.pool, "checkedin", None)
    return checkedin() if callable(checkedin) else 0


def _pool_slots(request: Request, engine: Engine) -> asyncio.Semaphore:
    """One slot per connection the pool can hand out: requests queue here, not in worker threads."""
    slots = getattr(request.app.state, "conn_slots", None)
    if slots is None:
        pool = engine.pool
        size = pool.size() + max(getattr(pool, "_max_overflow", 0), 0) if hasattr(pool, "size") else 1_000
        slots = request.app.state.conn_slots = asyncio.Semaphore(max(1, size))
    return slots


async def catch_up(searcher: Searcher) -> None:
    """A due catch-up of the full-text index (`Searcher.catch_up`) awaited at most CATCH_UP_WAIT_S without holding up
    the event loop: it runs in its own thread, and every other request goes on being answered meanwhile."""
    flight = searcher.catch_up()
    if flight is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(flight)), CATCH_UP_WAIT_S)


async def caught_up(searcher: Searcher) -> None:
    """`catch_up`, then SearchNotReady (503) while no generation is open: a search then runs with `sync=False`."""
    await catch_up(searcher)
    searcher.ready()


PagesDep = Annotated[Pages, Depends(get_pages)]
SearchDep = Annotated[Searcher, Depends(get_searcher)]
EvidenceDep = Annotated[EvidenceStore, Depends(get_evidence)]
HealthDep = Annotated[Health | None, Depends(get_health)]
ConnDep = Annotated[Connection, Depends(get_conn)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

# The search and listing parameters' one definition: FastAPI's declarations below and the lean search path
# (app/api/search.py's `lean_params`) both read these.
LIMIT_MAX = 200
"""The most results or pages one answer holds (`limit`)."""
OFFSET_MAX = 1_000_000
"""The furthest window an `offset` may start at."""
PARAMETER_MAX_CHARS = 100
"""The longest value a filter or `facets` may have."""
FILTER_NAMES = tuple(f.name for f in fields(Filters))
"""The filter parameters, in `Filters`' order."""

_FILTER = dict(max_length=PARAMETER_MAX_CHARS)


async def get_filters(  # async: without filters no I/O at all, with them one indexed row (no worker-thread hop)
    searcher: SearchDep,
    conn: ConnDep,
    type: Annotated[str | None, Query(description="page type, e.g. hardware", **_FILTER)] = None,
    arch: Annotated[str | None, Query(description="GPU family: sm90 and sm90a both match sm90/sm90a pages", **_FILTER)] = None,
    tag: Annotated[str | None, Query(**_FILTER)] = None,
    language: Annotated[str | None, Query(**_FILTER)] = None,
    confidence: Annotated[str | None, Query(**_FILTER)] = None,
    technique: Annotated[
        str | None, Query(description="a value of the pages' `techniques` (case-insensitive)", **_FILTER)
    ] = None,
    hardware_feature: Annotated[
        str | None, Query(description="a value of the pages' `hardware_features` (case-insensitive)", **_FILTER)
    ] = None,
    kernel_type: Annotated[
        str | None, Query(description="a value of the pages' `kernel_types` (case-insensitive)", **_FILTER)
    ] = None,
) -> Filters:
    filters = Filters(
        type=type or None,
        arch=arch or None,
        tag=tag or None,
        language=language or None,
        confidence=confidence or None,
        technique=technique or None,
        hardware_feature=hardware_feature or None,
        kernel_type=kernel_type or None,
    )
    if filters.as_params():
        await catch_up(searcher)  # the values a filter may take are the full-text index's
        if searcher.engine.generation is not None:  # none open yet: a listing answers (from SQL) unchecked, a search 503s
            check_filters(searcher, filters, conn)
    return filters


def check_filters(searcher: Searcher, filters: Filters, conn: Connection) -> None:
    """422 naming each filter value no page can have, with the values allowed."""
    problems = searcher.filter_problems(filters, conn=conn, sync=False)
    if problems:  # a value no page can have is a mistake to name, not an empty answer
        raise HTTPException(422, [query_problem(p.parameter, p.message, p.allowed) for p in problems])


def query_problem(parameter: str, msg: str, allowed: list[str] | None = None) -> dict[str, Any]:
    """One refused query parameter, as a 422's `detail` lists it (the shape of FastAPI's own validation errors)."""
    problem: dict[str, Any] = {"loc": ["query", parameter], "msg": msg, "type": "value_error"}
    if allowed is not None:
        problem["allowed"] = allowed
    return problem


FiltersDep = Annotated[Filters, Depends(get_filters)]


def get_facets(
    facets: Annotated[
        str,
        Query(
            max_length=PARAMETER_MAX_CHARS,
            description=f"comma-separated, of {', '.join(FACETS)}: count the hits by these (none unless asked; costs about as much as the search)",
        ),
    ] = "",
) -> tuple[str, ...]:
    try:
        return parse_facets(facets)
    except ValueError as e:
        raise HTTPException(422, [query_problem("facets", str(e), list(FACETS))]) from e


FacetsDep = Annotated[tuple[str, ...], Depends(get_facets)]
Limit = Annotated[int, Query(ge=1, le=LIMIT_MAX)]
Offset = Annotated[int, Query(ge=0, le=OFFSET_MAX)]
TOKEN_MAX_CHARS = 2000
"""The longest `next` token a listing accepts (one sort key: a page's type, title and id)."""
NextToken = Annotated[
    str | None,
    Query(max_length=TOKEN_MAX_CHARS, description="the `next` token of the previous window (keyset paging; not with `offset`)"),
]


def sort_key(token: str | None, offset: int, types: tuple[type, ...]) -> tuple[Any, ...] | None:
    """The sort key a listing's `next` token holds (None without one); 422 naming `next` for a token this service did
    not give out, or for one sent with an `offset`."""
    if token is None:
        return None
    if offset:
        raise HTTPException(422, [query_problem("next", "next: a window starts after a token or at an offset, not both")])
    try:
        return keyset.key_of(token, types)
    except ValueError as exc:
        raise HTTPException(
            422, [query_problem("next", f"next: {exc}; start without it, then pass the `next` of each answer")]
        ) from None


_bearer = HTTPBearer(auto_error=False, description="the runner token: `Authorization: Bearer $KERNELWIKI_RUNNER_TOKEN`")


def require_runner_token(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries `Authorization: Bearer <runner token>` (a bare token is refused).

    Runs before the body of the request is read, so an unauthenticated upload costs nothing.
    """
    expected = settings.runner_token.get_secret_value() if settings.runner_token else None
    given = credentials.credentials if credentials is not None else ""
    if not expected or not given or not hmac.compare_digest(given.encode(), expected.encode()):
        # Connection: close: the server drops the connection instead of draining an unread upload.
        raise HTTPException(
            401,
            "a valid runner token is required (Authorization: Bearer TOKEN)",
            headers={"WWW-Authenticate": "Bearer", "Connection": "close"},
        )
