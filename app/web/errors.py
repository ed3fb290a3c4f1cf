"""Friendly HTML error pages for browser requests (the API keeps its JSON error shape)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.errors import TITLES
from app.web.respond import html_page

HINTS = {
    404: "The page may have been renamed or merged. Search for it, or start from the home page.",
    422: "Some part of the address is not valid here.",
    500: "Something went wrong on our side. It has been logged; please try again.",
}


def html_error_renderer(request: Request, status: int, detail: Any) -> Response:
    """An error page with the status, what went wrong, and a way back."""
    message = detail if isinstance(detail, str) else None
    guess = ""
    path = request.url.path
    if status == 404:
        tail = path.rstrip("/").rsplit("/", 1)[-1]
        guess = tail.removesuffix(".md").replace("-", " ") if tail else ""
    context = {
        "status": status,
        "heading": TITLES.get(status, "Error"),
        "message": message,
        "hint": HINTS.get(status, ""),
        "guess": guess,
        "title": f"{status} {TITLES.get(status, 'Error')}",
    }
    try:
        return html_page(request, "error.html", context, status=status)
    except Exception:  # the error page itself must never fail: fall back to a plain answer
        from starlette.responses import PlainTextResponse

        return PlainTextResponse(f"{status} {TITLES.get(status, 'Error')}", status_code=status)
