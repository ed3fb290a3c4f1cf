"""The docs browser's HTML views: home, page, search, alias, evidence dashboard, graph.

Every view takes the request's one connection (`ConnDep`) and passes it down.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import ConnDep, EvidenceDep, Offset, PagesDep, SearchDep, SettingsDep
from app.index.filters import Filters
from app.search import FACETS
from app.web.respond import html_page
from app.web.sass import matrix_lines
from app.web.state import web_state
from app.web.views import dashboard_view, graph_drawing, home_view, listing_as_results, page_view

router = APIRouter(include_in_schema=False)
Param = Annotated[str | None, Query(max_length=200)]


@router.get("/")
def home(
    request: Request,
    pages: PagesDep,
    conn: ConnDep,
    arch: Param = None,
    type: Param = None,
    tag: Param = None,
    offset: Offset = 0,
) -> Response:
    return _listing(request, pages, conn, "/", "home.html", None, arch, type, tag, offset)


@router.get("/pages")
def pages(
    request: Request,
    pages: PagesDep,
    conn: ConnDep,
    arch: Param = None,
    type: Param = None,
    tag: Param = None,
    offset: Offset = 0,
) -> Response:
    """Every page, a window at a time: the home page's listing without the introduction."""
    return _listing(request, pages, conn, "/pages", "pages.html", "Pages", arch, type, tag, offset)


def _listing(
    request: Request,
    pages: PagesDep,
    conn: ConnDep,
    path: str,
    template: str,
    title: str | None,
    arch: str | None,
    type_: str | None,
    tag: str | None,
    offset: int,
) -> Response:
    """The pages the filters select (home_view), with links to the previous and next window under `path`."""
    view = home_view(pages, web_state(request), arch or None, type_ or None, tag or None, offset=offset, conn=conn)
    base = {k: v for k, v in {"arch": arch, "type": type_, "tag": tag}.items() if v}

    def at(new_offset: int | None) -> str | None:
        if new_offset is None:
            return None
        query = urlencode({**base, **({"offset": new_offset} if new_offset else {})})
        return f"{path}?{query}" if query else path

    context = {
        "view": view,
        "arch": arch or "",
        "type": type_ or "",
        "tag": tag or "",
        "title": title,
        "next_url": at(view.next_offset),
        "prev_url": at(view.prev_offset),
    }
    return html_page(request, template, context)


def _page_response(request: Request, pages: PagesDep, conn: ConnDep, page_id: str, canonical: bool) -> Response:
    view = page_view(pages, web_state(request), page_id, conn)
    if view is None:
        raise HTTPException(404, f"There is no page with the id “{page_id}”.")
    context = {"view": view, "p": view.page, "title": view.page.title, "canonical": canonical}
    return html_page(request, "page.html", context | {"matrices": matrix_lines(request, conn, view.evidence)})


@router.get("/pages/{page_id}")
def page(request: Request, pages: PagesDep, conn: ConnDep, page_id: str) -> Response:
    return _page_response(request, pages, conn, page_id, canonical=False)


@router.get("/wiki/{path:path}")
def wiki_file(request: Request, pages: PagesDep, conn: ConnDep, path: str) -> Response:
    """A page by its file's path under the wiki pages folder (with or without `.md`): a KernelWiki repository's
    `wiki/`, or the plain folder of pages (app/index/lookup.py `RepositoryFiles.under_wiki`)."""
    page_id = pages.page_under_wiki(path, conn=conn) or (
        pages.page_under_wiki(path + ".md", conn=conn) if not path.endswith(".md") else None
    )
    if page_id is None:
        raise HTTPException(404, f"No wiki file is at “{path}”.")
    return _page_response(request, pages, conn, page_id, canonical=True)


@router.get("/a/{alias:path}")
def alias(pages: PagesDep, conn: ConnDep, alias: str) -> Response:
    """An alias, title or id → a redirect to its page."""
    page_id = pages.resolve(alias, conn=conn)
    if page_id is None:
        raise HTTPException(404, f"No page is called “{alias}”.")
    return RedirectResponse(f"/pages/{page_id}", status_code=302)


@router.get("/search")
def search(
    request: Request,
    searcher: SearchDep,
    pages: PagesDep,
    conn: ConnDep,
    settings: SettingsDep,
    q: str = "",
    type: Param = None,
    arch: Param = None,
    tag: Param = None,
    language: Param = None,
    technique: Param = None,
    hardware_feature: Param = None,
    kernel_type: Param = None,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> Response:
    """Ranked section search; with filters but no words, the pages the filters select."""
    q = q[: settings.search_max_query_chars]  # what search uses; links and the form carry no more than this
    echo = q if len(q) <= settings.query_echo_chars else q[: settings.query_echo_chars] + "…"  # what the page shows of it
    filters = Filters(
        type=type or None,
        arch=arch or None,
        tag=tag or None,
        language=language or None,
        technique=technique or None,
        hardware_feature=hardware_feature or None,
        kernel_type=kernel_type or None,
    )
    if q.strip():
        searcher.caught_up()  # this worker thread waits (boundedly); not ready yet: the 503 page says so
    else:
        searcher.catch_up()  # in the background: a listing reads SQL
    opened = searcher.engine.generation is not None  # none open yet: a listing by filters answers unchecked
    problems = searcher.filter_problems(filters, conn=conn, sync=False) if opened else []
    result = None  # a filter value no page has is answered with its message on the search page, as a 422
    if q.strip() and not problems:
        result = searcher.search(
            q, filters, limit=20, offset=offset, max_chars=settings.search_max_query_chars, facets=FACETS, sync=False
        )
    elif filters.as_params() and not problems:
        result = listing_as_results(pages.list_pages(filters, limit=20, offset=offset, conn=conn), filters, offset)
    base = {"q": q, **filters.as_params()}

    def with_(**change: str | None) -> str:
        params = {**base, **change}
        return "/search?" + urlencode({k: v for k, v in params.items() if v})

    context = {
        "q": q,
        "echo": echo,
        "result": result,
        "filters": filters,
        "with_": with_,
        "title": f"Search: {echo}" if q else "Search",
        "problems": [p.message for p in problems],
        "file_of": pages.files.file,  # a result's file as the wiki's repository names it
    }
    return html_page(request, "search.html", context, status=422 if problems else 200)


@router.get("/evidence")
def evidence(
    request: Request,
    evidence: EvidenceDep,
    conn: ConnDep,
    status: Param = None,
    target: Param = None,
    page: Param = None,
    offset: Offset = 0,
) -> Response:
    view = dashboard_view(evidence, status or None, target or None, page or None, offset=offset, conn=conn)
    chosen = {"status": status or "", "target": target or "", "page": page or ""}
    base = {k: v for k, v in chosen.items() if v}

    def at(new_offset: int | None) -> str | None:
        return (
            None if new_offset is None else "/evidence?" + urlencode({**base, **({"offset": new_offset} if new_offset else {})})
        )

    context = {
        "view": view,
        "chosen": chosen,
        "title": "Evidence",
        "next_url": at(view.next_offset),
        "prev_url": at(view.prev_offset),
    }
    return html_page(request, "evidence.html", context)


@router.get("/graph")
def graph(request: Request, pages: PagesDep, conn: ConnDep, page: Param = None) -> Response:
    """The most-linked pages, or the neighbourhood of `page`; each drawing is laid out once per index generation."""
    page_id = pages.resolve(page, conn=conn) if page else None
    if page and page_id is None:
        raise HTTPException(404, f"No page is called “{page}”.")
    drawing, counts = graph_drawing(web_state(request), pages, conn, page_id)
    context = {"drawing": drawing, "counts": counts, "title": "Graph", "center": page_id, "asked": page or ""}
    return html_page(request, "graph.html", context)
