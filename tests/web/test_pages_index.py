"""/pages lists every page (a window at a time), and each page shows its title once; over real HTTP."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest

HTML = {"accept": "text/html"}


@pytest.fixture
def client(server: Any) -> Any:
    with httpx.Client(base_url=server.url, headers=HTML, timeout=30) as c:
        yield c


def _listed(text: str) -> list[str]:
    return re.findall(r'<a href="/pages/([^"]+)">', text.split("<main", 1)[1])


def test_the_pages_index_links_every_page_and_pages_through_them(client: Any) -> None:
    every = [p["id"] for p in client.get("/api/pages", params={"limit": 200}).json()["pages"]]
    r = client.get("/pages")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert sorted(_listed(r.text)) == sorted(every)
    assert "<title>Pages · kernelwiki</title>" in r.text
    later = client.get("/pages", params={"offset": 1})
    assert len(_listed(later.text)) == len(every) - 1
    assert '<a href="/pages" rel="prev">' in later.text
    only = client.get("/pages", params={"type": "technique"})
    assert set(_listed(only.text)) == {p["id"] for p in client.get("/api/pages", params={"type": "technique"}).json()["pages"]}
    assert client.get("/pages", params={"offset": -1}).status_code == 422


def test_every_page_shows_its_title_once(client: Any) -> None:
    pages = client.get("/api/pages", params={"limit": 200}).json()["pages"]
    assert pages
    for p in pages:
        body = client.get(f"/pages/{p['id']}").text.split("<main", 1)[1]
        shown = re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", body, re.S)
        texts = [html.unescape(re.sub(r"<[^>]+>|#$", "", h)).strip() for h in shown]
        assert texts.count(p["title"]) == 1, (p["id"], texts)
