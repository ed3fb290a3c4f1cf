"""The HTML docs browser: server-rendered views over the same services the REST API uses (app/pages.py, app/search, app/evidence).

`install_web(app)` adds the views and the static assets to an app and returns
the HTML error renderer that `app.errors` uses for browser requests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from app.web.routes import router
from app.web.sass import router as sass_router
from app.web.state import STATIC, WebState

ErrorRenderer = Callable[[Request, int, Any], Response]


def _asset_version() -> str:
    """A short hash of the static files, so a changed asset gets a new URL (static/swagger/ is /docs's own)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in STATIC.glob("*") if p.is_file()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:10]


def install_web(app: FastAPI) -> ErrorRenderer:
    """Add the docs browser to `app`; returns `(request, status, detail) -> HTML response`."""
    from app.web.errors import html_error_renderer

    app.state.web = WebState(asset_version=_asset_version())
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.include_router(router)
    from app.web.repository_views import router as repository_router  # performance claims, queries/ views

    app.include_router(repository_router)
    app.include_router(sass_router)  # SASS, diff and /changes views (issue 24)
    return html_error_renderer
