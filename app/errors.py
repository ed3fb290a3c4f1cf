"""The one error shape, `{"error": {"status", "title", "detail"}}`, built by one function for every error."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("kernelwiki")

TITLES = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
          413: "Payload too large", 422: "Invalid parameters", 500: "Internal error"}  # fmt: skip


def error_body(status: int, detail: Any = None, title: str | None = None) -> dict[str, Any]:
    """The JSON body of every error answer."""
    return {"error": {"status": status, "title": title or TITLES.get(status, "Error"), "detail": detail}}


def wants_html(request: Request) -> bool:
    """HTML error pages for browser views; JSON for the API."""
    return not request.url.path.startswith("/api") and "text/html" in request.headers.get("accept", "")


def install_error_handlers(app: FastAPI, html_renderer: Any = None) -> None:
    """Route every exception through `error_body` (or an HTML page for browsers)."""

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
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        return respond(request, 422, detail)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        return respond(request, 500, "an unexpected error happened; it has been logged")
