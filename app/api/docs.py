"""`/docs`: Swagger UI served from installed files, under a CSP.

FastAPI's self-hosted docs recipe: the default `/docs` loads Swagger UI from a
CDN; here its JavaScript and CSS come from `/docs/assets/` and its start-up
script from `/docs/init.js`, so the page needs no inline script and nothing
from another host. The files are Swagger UI 5 (Apache-2.0; 5.x reads the
OpenAPI 3.1 that FastAPI writes, 4.x does not), vendored in app/static/swagger/.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # Swagger UI sets style attributes on its elements
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kernelwiki API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" href="/static/favicon.svg">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""


def assets_folder() -> str:
    """The Swagger UI 5 files vendored in app/static/swagger (swagger-ui-bundle.js, swagger-ui.css; its README and
    LICENSE say which release, and how to update it)."""
    from importlib.resources import files

    return str(files("app") / "static" / "swagger")


def install(app: FastAPI) -> None:
    """Mount the Swagger UI files at /docs/assets."""
    app.mount("/docs/assets", StaticFiles(directory=assets_folder()), name="docs-assets")


@router.get("/docs")
def docs_page() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=HEADERS)


@router.get("/docs/init.js")
def docs_init(request: Request) -> Response:
    options = {"url": request.app.openapi_url, "dom_id": "#swagger-ui", "deepLinking": True, "validatorUrl": None}
    script = f"window.ui = SwaggerUIBundle({json.dumps(options)});\n"
    return Response(script, media_type="text/javascript", headers=HEADERS)
