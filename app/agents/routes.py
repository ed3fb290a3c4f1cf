"""Markdown for agents over HTTP: `/llms.txt`, `/llms-full.txt` and `/pages/{id}.md`.

`/pages/{id}.md` must be added before the HTML route `/pages/{id}` (page ids
never end in `.md`: app/index/pages.py refuses them), which `install_agents` does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from sqlalchemy.engine import Connection

from app.agents.cache import RenderedDocuments, matches
from app.agents.documents import RanOn, llms_full_txt, llms_txt, page_document
from app.deps import ConnDep, PagesDep
from app.evidence.status import data_version
from app.index.db import index_generation
from app.index.run_gpus import ran_on
from app.pages import Pages

router = APIRouter(tags=["agents"])
MARKDOWN = "text/markdown; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


SEND_TRIES = 3
"""Times a document is looked up for one request when its file was removed as old between lookup and opening."""


def _cached(request: Request, conn: Connection, key: Hashable, render: Callable[[str], str | Iterable[str]]) -> Response:
    """A rendered document (once per version: app/agents/cache.py) with a strong ETag; 304 when the client has it.

    The document is sent from its file in blocks; HEAD gets the same headers and no body.
    """
    documents: RenderedDocuments = request.app.state.agent_documents
    origin = _base(request)
    for _ in range(SEND_TRIES):
        rendered = documents.get(conn, key, render)
        etag = rendered.etag(origin)
        headers = {"ETag": etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        try:
            handle = rendered.open()
        except FileNotFoundError:  # another process removed it as old meanwhile: find it or render it again
            documents.forget(key)
            continue
        headers["Content-Length"] = str(rendered.length(origin))
        if request.method == "HEAD":
            handle.close()
            return Response(media_type=TEXT, headers=headers)
        return StreamingResponse(rendered.send(handle, origin), media_type=TEXT, headers=headers)
    raise HTTPException(503, "the document changed while it was being sent; try again", headers={"Retry-After": "1"})


@router.get("/llms.txt", response_class=PlainTextResponse, summary="llmstxt.org index of every page")
@router.head("/llms.txt", include_in_schema=False)
def get_llms_txt(request: Request, pages: PagesDep, conn: ConnDep) -> Response:
    """Rendered once per index generation and what ran where; `If-None-Match` with the ETag answers 304."""
    key = llms_txt_key(conn)
    return _cached(request, conn, key, lambda origin: llms_txt(pages, origin, key[2]))


def warm_llms_txt(app: Any) -> None:
    """Render /llms.txt for the index as it is now, the way its route would (the start-up warm-up, app/main.py):
    at 10,000 pages the first request after a start paid 110-290 ms for it."""
    store = app.state.store
    with store.engine.connect() as conn:
        llms_txt_of(store.pages, app.state.agent_documents, conn)


def llms_txt_of(pages: Pages, documents: RenderedDocuments, conn: Connection) -> None:
    """/llms.txt of the generation behind `conn` in `documents` (rendered unless a process has it already)."""
    key = llms_txt_key(conn)
    documents.get(conn, key, lambda origin: llms_txt(pages, origin, key[2]))


def llms_txt_key(conn: Connection) -> tuple[str, int | None, RanOn]:
    """/llms.txt's version: the index generation (it lists pages) and what ran where (app/index/run_gpus.py, a read
    of a few rows): its only words from the evidence, which change when a GPU first runs a program of a family,
    not with every record."""
    return ("llms.txt", index_generation(conn), ran_on(conn))


@router.get("/llms-full.txt", response_class=PlainTextResponse, summary="every page's Markdown in one file")
@router.head("/llms-full.txt", include_in_schema=False)
def get_llms_full_txt(request: Request, pages: PagesDep, conn: ConnDep) -> Response:
    """Rendered once per data version (index generation and evidence); `If-None-Match` with the ETag answers 304."""
    # What ran where is read only when the document is rendered: it changes with the evidence, as the version does.
    return _cached(
        request, conn, ("llms-full.txt", data_version(conn)), lambda origin: llms_full_txt(pages, origin, ran_on(conn))
    )


@router.get("/pages/{page_id}.md", response_class=PlainTextResponse, summary="a page as Markdown with its evidence")
def get_page_markdown(request: Request, pages: PagesDep, page_id: str) -> Response:
    text = page_document(pages, page_id, _base(request))
    if text is None:
        raise HTTPException(404, f"no page with id '{page_id}'")
    return Response(text, media_type=MARKDOWN)
