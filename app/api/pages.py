"""Pages: listing, one page with everything about it, name resolution, the link graph."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from app.deps import FiltersDep, Limit, Offset, StoreDep
from app.schemas import PageList, PagePublic, PageSummary

router = APIRouter(prefix="/api", tags=["pages"])


@router.get("/pages", response_model=PageList)
def list_pages(store: StoreDep, filters: FiltersDep, limit: Limit = 50, offset: Offset = 0) -> PageList:
    return store.list_pages(filters, limit=limit, offset=offset)


@router.get("/pages/{page_id}", response_model=PagePublic)
def get_page(store: StoreDep, page_id: str) -> PagePublic:
    page = store.get_page(page_id)
    if page is None:
        raise HTTPException(404, f"no page with id '{page_id}'")
    return page


@router.get("/resolve", response_model=PageSummary)
def resolve(store: StoreDep, name: Annotated[str, Query(min_length=1, max_length=500)]) -> PageSummary:
    page_id = store.resolve(name)
    page = store.get_page(page_id) if page_id else None
    if page is None:
        raise HTTPException(404, f"no page has the alias, title or id '{name}'")
    return PageSummary(
        id=page.id, title=page.title, type=page.type, path=page.path,
        architectures=page.meta.get("architectures", []), tags=page.meta.get("tags", []),
        confidence=page.meta.get("confidence"),
    )  # fmt: skip


@router.get("/graph")
def graph(store: StoreDep) -> dict[str, Any]:
    return store.graph()
