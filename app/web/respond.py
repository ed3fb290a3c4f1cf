"""Turning a template into an HTML response with the browser's security headers.

Every HTML answer of the docs browser goes through `html_page`, so each one
carries the strict Content-Security-Policy: scripts only from this origin
(no inline script, no `javascript:` URL, no event-handler attribute can run),
styles and images only from this origin, and nothing fetched from elsewhere.
The API's JSON answers and FastAPI's own /docs are left alone.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from app.web.state import web_state

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def html_page(
    request: Request, template: str, context: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """Render `template` with `context` (plus the request) into a secured HTML response."""
    state = web_state(request)
    body = state.env.get_template(template).render(request=request, v=state.asset_version, **context)
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})
