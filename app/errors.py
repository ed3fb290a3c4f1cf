"""The one error shape, `{"error": {"status", "title", "detail"}}`, built by one function for every error."""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the web stack is imported by `install_error_handlers` alone: the command line reads the lines below
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

log = logging.getLogger("kernelwiki")

TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    413: "Payload too large",
    422: "Invalid parameters",
    500: "Internal error",
    503: "Service unavailable",
}
DAMAGED = ("malformed", "not a database", "disk image", "corrupt", "file is encrypted")
"""What SQLite says when the index file itself is broken (rather than busy or missing a table)."""
REBUILD_HINT = "rebuild it with `kernelwiki index --rebuild` (evidence is kept where it can still be read)"


class SearchNotReady(Exception):
    """The process has no generation of the full-text index open yet: a search is answered 503 with Retry-After."""


RETRY_AFTER_S = 5
"""What a 503 for a full-text index still being built tells the client to wait (Retry-After)."""


def index_path(url: str) -> str:
    """The index file of a SQLite URL (the URL itself for other databases), for messages."""
    if url.startswith("sqlite") and "///" in url:
        return url.split("///", 1)[1].removeprefix("file:").split("?", 1)[0]
    return url.split("@")[-1]  # never print a password


def broken_index_line(url: str, exc: BaseException) -> str | None:
    """One line naming the index file and the fix when `exc` says the index is damaged; None for other errors."""
    orig = getattr(exc, "orig", None) or exc
    if not isinstance(orig, sqlite3.DatabaseError):
        return None
    if type(orig) is not sqlite3.DatabaseError and not any(word in str(orig).lower() for word in DAMAGED):
        return None  # busy, locked, a missing table: not damage
    return damaged_line(url, str(orig))


def damaged_line(url: str, reason: str) -> str:
    """The one line printed (and answered with 503) for a damaged index."""
    return f"{index_path(url)}: error: the index is damaged ({reason}); {REBUILD_HINT}"


def error_body(status: int, detail: Any = None, title: str | None = None) -> dict[str, Any]:
    """The JSON body of every error answer."""
    return {"error": {"status": status, "title": title or TITLES.get(status, "Error"), "detail": detail}}


def wants_html(request: Request) -> bool:
    """HTML error pages for browser views; JSON for the API."""
    return not request.url.path.startswith("/api") and "text/html" in request.headers.get("accept", "")


def install_error_handlers(app: FastAPI, html_renderer: Any = None) -> None:
    """Route every exception through `error_body` (or an HTML page for browsers)."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from sqlalchemy.exc import DatabaseError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def respond(request: Request, status: int, detail: Any, headers: dict[str, str] | None = None) -> Response:
        if html_renderer is not None and wants_html(request):
            return html_renderer(request, status, detail)
        return JSONResponse(error_body(status, detail), status_code=status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return respond(request, exc.status_code, exc.detail, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()
        ]
        return respond(request, 422, detail)

    @app.exception_handler(DatabaseError)
    async def database_error(request: Request, exc: DatabaseError) -> Response:
        """A damaged index answers 503 with the fix (and /api/health turns `degraded`); other database errors are 500s."""
        settings = getattr(request.app.state, "settings", None)
        line = broken_index_line(settings.db if settings is not None else "", exc)
        if line is None:
            return await unexpected(request, exc)
        status = getattr(request.app.state, "index_status", None)
        if status is not None:
            status.degrade(line)
        return respond(request, 503, line)

    @app.exception_handler(SearchNotReady)
    async def search_not_ready(request: Request, exc: SearchNotReady) -> Response:
        return respond(request, 503, str(exc), {"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        return respond(request, 500, "an unexpected error happened; it has been logged")
