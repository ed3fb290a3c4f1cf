"""`GET /api/search`: ranked section-level search with filters and facets."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import FiltersDep, Limit, Offset, SettingsDep, StoreDep
from app.schemas import SearchPublic

router = APIRouter(prefix="/api", tags=["search"])


@router.get("/search", response_model=SearchPublic)
def search(
    store: StoreDep,
    settings: SettingsDep,
    filters: FiltersDep,
    q: Annotated[str, Query(description="free text; GPU identifiers such as cp.async.bulk are words")] = "",
    limit: Limit = 20,
    offset: Offset = 0,
) -> SearchPublic:
    return store.search(q, filters, limit=limit, offset=offset, max_chars=settings.search_max_query_chars)
