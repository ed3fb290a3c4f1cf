"""The evidence dashboard and the graph view stay bounded: windows of rows with links on, a neighbourhood graph."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.web.views import DASHBOARD_PAGE_SIZE

HTML = {"accept": "text/html"}
BLOCKS = DASHBOARD_PAGE_SIZE + 7


@pytest.fixture
def client(server: Any, web_wiki: Path) -> Any:
    (web_wiki / "many.md").write_text(
        "---\nid: many\ntitle: Many kernels\ntype: technique\narchitectures: [sm90a]\nrelated: [hw-tma]\n---\n"
        + "".join(f"\n```cuda\n__global__ void k{i}(int* p) {{ p[{i}] = 1; }}\n```\n" for i in range(BLOCKS))
    )
    server.app.state.store.reindex(web_wiki)
    with httpx.Client(base_url=server.url, headers=HTML, timeout=30) as c:
        yield c


def _rows(text: str) -> list[str]:
    return re.findall(r'<a href="/pages/many#snippet-(\d+)">', text.split("<tbody>", 1)[1])


def test_the_dashboard_shows_a_window_of_rows_and_links_to_the_next(client: Any) -> None:
    first = client.get("/evidence", params={"page": "many"}).text
    assert len(_rows(first)) == DASHBOARD_PAGE_SIZE
    assert f"<strong data-row-count>{BLOCKS}</strong>" in first
    nxt = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert nxt is not None and "offset=" in nxt.group(1)
    rest = client.get(nxt.group(1).replace("&amp;", "&")).text
    assert len(_rows(rest)) == BLOCKS - DASHBOARD_PAGE_SIZE and 'rel="prev"' in rest and 'rel="next"' not in rest
    assert sorted(map(int, _rows(first) + _rows(rest))) == list(range(1, BLOCKS + 1))


def test_the_graph_shows_one_pages_neighbourhood(client: Any) -> None:
    text = client.get("/graph", params={"page": "many"}).text
    nodes = set(re.findall(r'data-id="([^"]+)"', text))
    assert nodes == {"many", "hw-tma"}
    assert 'href="/pages/many"' in text and 'data-a="many"' in text
    assert client.get("/graph", params={"page": "no-such-page"}).status_code == 404
    whole = set(re.findall(r'data-id="([^"]+)"', client.get("/graph").text))
    assert {"many", "hw-tma", "hw-tmem"} <= whole


def test_the_start_up_warm_up_draws_the_graph_so_the_first_request_lays_out_nothing(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.web.views

    assert server.app.state.web.prerendered.wait(60)
    laid_out: list[Any] = []
    real = app.web.views.layout

    def counted(graph: Any) -> Any:
        laid_out.append(graph)
        return real(graph)

    monkeypatch.setattr(app.web.views, "layout", counted)
    text = httpx.get(f"{server.url}/graph", headers=HTML, timeout=30).text
    assert 'data-id="hw-tma"' in text and laid_out == []  # the warm-up's drawing
    assert httpx.get(f"{server.url}/graph", params={"page": "hw-tma"}, headers=HTML, timeout=30).status_code == 200
    assert len(laid_out) == 1  # a neighbourhood is drawn on its first request
