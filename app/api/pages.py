"""Pages: listing, one page with everything about it, name resolution, the link graph."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from app.deps import ConnDep, FiltersDep, Limit, NextToken, Offset, PagesDep, sort_key
from app.index.graph import GRAPH_LIMIT
from app.index.listing import PAGE_KEY
from app.schemas import PageList, PagePublic, PageSummary

router = APIRouter(prefix="/api", tags=["pages"])


@router.get("/pages", response_model=PageList)
def list_pages(
    pages: PagesDep,
    conn: ConnDep,
    filters: FiltersDep,
    limit: Limit = 50,
    offset: Offset = 0,
    next: NextToken = None,  # noqa: A002 - Datasette's name for the keyset token
) -> PageList:
    """One window of the filtered pages (after the `next` token of the previous one, or at `offset`), the exact total,
    and facets."""
    after = sort_key(next, offset, PAGE_KEY)
    return pages.list_pages(filters, limit=limit, offset=offset, conn=conn, after=after)


@router.get("/pages/{page_id}", response_model=PagePublic)
def get_page(pages: PagesDep, conn: ConnDep, page_id: str) -> PagePublic:
    page = pages.get_page(page_id, conn=conn, html=True)
    if page is None:
        raise HTTPException(404, f"no page with id '{page_id}'")
    return page


@router.get("/resolve", response_model=PageSummary)
def resolve(pages: PagesDep, conn: ConnDep, name: Annotated[str, Query(min_length=1, max_length=500)]) -> PageSummary:
    page_id = pages.resolve(name, conn=conn)
    page = pages.get_page(page_id, conn=conn) if page_id else None
    if page is None:
        raise HTTPException(404, f"no page has the alias, title or id '{name}'")
    return PageSummary(
        id=page.id,
        title=page.title,
        type=page.type,
        path=page.path,
        architectures=page.meta.get("architectures", []),
        tags=page.meta.get("tags", []),
        confidence=page.meta.get("confidence"),
    )


@router.get("/graph")
def graph(
    pages: PagesDep,
    conn: ConnDep,
    page: Annotated[str | None, Query(max_length=200, description="a page id: answer with its neighbourhood")] = None,
    depth: Annotated[int, Query(ge=1, le=3, description="links away from `page`")] = 1,
    limit: Annotated[int, Query(ge=1, le=1000, description="most nodes in the answer")] = GRAPH_LIMIT,
) -> dict[str, Any]:
    """A bounded part of the link graph: the neighbourhood of `page`, or the `limit` most-linked pages.

    `nodes` carry their degree in the whole graph; `edges` are the links among the nodes returned;
    `total_nodes`/`total_edges` count the whole graph.
    """
    page_id = pages.resolve(page, conn=conn) if page is not None else None
    if page is not None and page_id is None:
        raise HTTPException(404, f"no page has the alias, title or id '{page}'")
    return pages.graph(page=page_id, depth=depth, limit=limit, conn=conn)
