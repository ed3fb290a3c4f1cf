"""/docs from the package's own Swagger UI under a CSP, and a search page that echoes only a bounded query."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


def test_docs_are_self_hosted_under_a_csp(server: Any) -> None:
    page = httpx.get(server.url + "/docs")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-eval" not in csp
    assert "<script>" not in page.text and "cdn" not in page.text.lower()  # no inline script, nothing from elsewhere
    for src in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/docs/init.js"):
        assert src in page.text
        asset = httpx.get(server.url + src)
        assert asset.status_code == 200 and len(asset.content) > 50, src
    assert httpx.get(server.url + "/redoc").status_code == 404  # ReDoc would load from a CDN


@pytest.mark.browser
def test_docs_render_the_api_in_chromium_without_leaving_the_server(page: Any, server: Any) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server.url + "/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=15_000)
    assert page.locator(".opblock-summary-path", has_text="/api/evidence").count() >= 1
    assert page.external == [] and errors == []  # type: ignore[attr-defined]


def test_a_100_kb_query_is_echoed_cut_short(server: Any) -> None:
    import urllib.parse
    import urllib.request

    query = "wgmma " * 17_000  # 102 KB
    url = server.url + "/search?" + urllib.parse.urlencode({"q": query})
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"accept": "text/html"}), timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:  # the HTTP server's own request-line limit may answer first
        status, text = exc.code, exc.read().decode()
    assert status in (200, 400, 414), status
    assert len(text.encode()) < 150_000  # was 4.2 MB: the query echoed in full everywhere
    if status == 200:
        assert ("“" + "wgmma " * 34)[:200] in text and "…”" in text
        assert text.count("wgmma " * 400) == 0  # nothing carries more than the 2,000 characters search uses
    middle = "wgmma " * 1_000  # 6 KB: passes any request-line limit, still capped on the page
    text = httpx.get(server.url + "/search", params={"q": middle}, headers={"accept": "text/html"}, timeout=30).text
    assert ("“" + middle)[:201] + "…”" in text and text.count(middle[:2_500]) == 0
