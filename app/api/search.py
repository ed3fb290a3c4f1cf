"""`GET /api/search`: ranked section-level search with filters and facets."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.budget import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, budgeted
from app.deps import ConnDep, FiltersDep, Limit, Offset, SettingsDep, StoreDep
from app.schemas import SearchPublic

router = APIRouter(prefix="/api", tags=["search"])


@router.get("/search", response_model=SearchPublic)
async def search(
    request: Request,
    store: StoreDep,
    conn: ConnDep,
    settings: SettingsDep,
    filters: FiltersDep,
    q: Annotated[str, Query(description="free text; GPU identifiers such as cp.async.bulk are words")] = "",
    limit: Limit = 20,
    offset: Offset = 0,
    budget_tokens: Annotated[int | None, Query(ge=MIN_BUDGET_TOKENS, le=MAX_BUDGET_TOKENS, description="also answer with the best sections' Markdown within about this many tokens, ceil(characters / 4), in `context`")] = None,
) -> SearchPublic:
    # On the event loop: a search is ~2 ms of CPU (tantivy) and one indexed SQL row; a worker-thread hop costs more
    # than that under load, and threads add no parallelism to CPU-bound Python.
    result = store.search(q, filters, limit=limit, offset=offset, max_chars=settings.search_max_query_chars, conn=conn)
    if budget_tokens is not None:
        result.context = budgeted(store, result, budget_tokens, str(request.base_url), conn=conn)
    return result
