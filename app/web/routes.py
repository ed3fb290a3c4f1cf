"""The docs browser's HTML views: home, page, search, alias, evidence dashboard, graph."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import SettingsDep, StoreDep
from app.store import Filters
from app.web.graph import graph_key, layout
from app.web.respond import html_page
from app.web.state import web_state
from app.web.views import dashboard_view, home_view, listing_as_results, page_view

router = APIRouter(include_in_schema=False)
Param = Annotated[str | None, Query(max_length=200)]


@router.get("/")
def home(request: Request, store: StoreDep, arch: Param = None, type: Param = None, tag: Param = None) -> Response:
    view = home_view(store, web_state(request), arch or None, type or None, tag or None)
    return html_page(request, "home.html", {"view": view, "arch": arch or "", "type": type or "", "tag": tag or "", "title": None})


def _page_response(request: Request, store: StoreDep, page_id: str, canonical: bool) -> Response:
    view = page_view(store, web_state(request), page_id)
    if view is None:
        raise HTTPException(404, f"There is no page with the id “{page_id}”.")
    return html_page(request, "page.html", {"view": view, "p": view.page, "title": view.page.title, "canonical": canonical})


@router.get("/pages/{page_id}")
def page(request: Request, store: StoreDep, page_id: str) -> Response:
    return _page_response(request, store, page_id, canonical=False)


@router.get("/wiki/{path:path}")
def wiki_file(request: Request, store: StoreDep, path: str) -> Response:
    """A page by its file's path under wiki/ (with or without `.md`)."""
    page_id = store.page_by_path(path) or (store.page_by_path(path + ".md") if not path.endswith(".md") else None)
    if page_id is None:
        raise HTTPException(404, f"No wiki file is at “{path}”.")
    return _page_response(request, store, page_id, canonical=True)


@router.get("/a/{alias:path}")
def alias(store: StoreDep, alias: str) -> Response:
    """An alias, title or id → a redirect to its page."""
    page_id = store.resolve(alias)
    if page_id is None:
        raise HTTPException(404, f"No page is called “{alias}”.")
    return RedirectResponse(f"/pages/{page_id}", status_code=302)


@router.get("/search")
def search(
    request: Request, store: StoreDep, settings: SettingsDep, q: str = "",
    type: Param = None, arch: Param = None, tag: Param = None,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> Response:  # fmt: skip
    """Ranked section search; with filters but no words, the pages the filters select."""
    filters = Filters(type=type or None, arch=arch or None, tag=tag or None)
    result = None
    if q.strip():
        result = store.search(q, filters, limit=20, offset=offset, max_chars=settings.search_max_query_chars)
    elif filters.as_params():
        result = listing_as_results(store.list_pages(filters, limit=20, offset=offset))
    base = {"q": q, **filters.as_params()}

    def with_(**change: str | None) -> str:
        params = {**base, **change}
        return "/search?" + urlencode({k: v for k, v in params.items() if v})

    return html_page(request, "search.html", {"q": q, "result": result, "filters": filters, "with_": with_, "title": f"Search: {q}" if q else "Search"})


@router.get("/evidence")
def evidence(request: Request, store: StoreDep, status: Param = None, target: Param = None, page: Param = None) -> Response:
    view = dashboard_view(store, web_state(request), status or None, target or None, page or None)
    chosen = {"status": status or "", "target": target or "", "page": page or ""}
    return html_page(request, "evidence.html", {"view": view, "chosen": chosen, "title": "Evidence"})


@router.get("/graph")
def graph(request: Request, store: StoreDep) -> Response:
    """The related-pages graph; its drawing is laid out and rendered once per graph content."""
    data = store.graph()
    web = web_state(request)

    def draw() -> tuple[str, dict[str, object]]:
        drawn = layout(data)
        counts = {"nodes": len(drawn.nodes), "edges": len(drawn.edges), "types": drawn.types}
        return web.env.get_template("_graph.html").render(layout=drawn), counts

    drawing, counts = web.graphs.get_or_make(graph_key(data), draw)
    return html_page(request, "graph.html", {"drawing": drawing, "counts": counts, "title": "Graph"})
