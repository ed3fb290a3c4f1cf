"""Markdown for agents over HTTP: `/llms.txt`, `/llms-full.txt` and `/pages/{id}.md`.

`/pages/{id}.md` must be added before the HTML route `/pages/{id}` (page ids
never end in `.md`: app/pages.py refuses them), which `install_agents` does.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from app.agents.documents import llms_full_txt, llms_txt, page_document
from app.deps import StoreDep

router = APIRouter(tags=["agents"])
MARKDOWN = "text/markdown; charset=utf-8"


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/llms.txt", response_class=PlainTextResponse, summary="llmstxt.org index of every page")
def get_llms_txt(request: Request, store: StoreDep) -> Response:
    return PlainTextResponse(llms_txt(store, _base(request)), media_type="text/plain; charset=utf-8")


@router.get("/llms-full.txt", response_class=PlainTextResponse, summary="every page's Markdown in one file")
def get_llms_full_txt(request: Request, store: StoreDep) -> Response:
    return StreamingResponse(llms_full_txt(store, _base(request)), media_type="text/plain; charset=utf-8")


@router.get("/pages/{page_id}.md", response_class=PlainTextResponse, summary="a page as Markdown with its evidence")
def get_page_markdown(request: Request, store: StoreDep, page_id: str) -> Response:
    text = page_document(store, page_id, _base(request))
    if text is None:
        raise HTTPException(404, f"no page with id '{page_id}'")
    return Response(text, media_type=MARKDOWN)
