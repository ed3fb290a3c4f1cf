"""The HTML views over real HTTP, without a browser: status codes, headers, content, safety."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.records import record, typical

HTML = {"accept": "text/html"}


@pytest.fixture
def client(server: Any) -> Any:
    with httpx.Client(base_url=server.url, headers=HTML, timeout=30) as c:
        yield c


@pytest.fixture
def shared_client(shared_server: Any) -> Any:
    """A client of the module's shared server, for the tests that only read."""
    with httpx.Client(base_url=shared_server.url, headers=HTML, timeout=30) as c:
        yield c


def test_every_view_answers_html_with_a_strict_csp(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    for url in [
        "/",
        "/?arch=sm90",
        "/pages/hw-tma",
        "/wiki/nvidia/tma.md",
        "/wiki/nvidia/tma",
        "/search",
        "/search?q=tma",
        "/evidence",
        "/evidence?status=fail",
        "/graph",
    ]:
        r = client.get(url)
        assert r.status_code == 200, url
        assert r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, url
        assert '<main id="main"' in r.text and "http://" not in r.text.split("<main", 1)[0].replace("http://127.0.0.1", "")
    assert client.get("/static/style.css").status_code == 200


def test_errors_are_friendly_pages_for_browsers_and_json_for_the_api(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    r = client.get("/pages/no-such-page")
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]
    assert "There is no page with the id" in r.text and 'action="/search"' in r.text
    assert "content-security-policy" in r.headers
    assert client.get("/no/such/route").status_code == 404
    assert client.get("/a/no-such-alias").status_code == 404
    api = client.get("/api/pages/no-such-page")
    assert api.status_code == 404 and api.json()["error"]["status"] == 404
    plain = httpx.get(f"{client.base_url}/pages/no-such-page")  # no Accept: text/html
    assert plain.json()["error"]["title"] == "Not found"


def test_alias_title_and_id_redirect_to_the_page(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    for name, page_id in [
        ("TMEM", "hw-tmem"),
        ("cp.async.bulk.tensor", "hw-tma"),
        ("DEMOK", "web-demo"),
        ("demo kernels", "web-demo"),
        ("hw-mbarrier", "hw-mbarrier"),
    ]:
        r = client.get(f"/a/{name}", follow_redirects=False)
        assert r.status_code == 302 and r.headers["location"] == f"/pages/{page_id}", name


def test_body_links_to_pages_by_id_or_file_resolve_and_follow_the_wiki(server: Any, client: Any, web_wiki: Path) -> None:
    """A page view asks the index only about the ids and .md paths its own links name (no map of every page in each
    worker); a link to a page that appears later resolves after the reindex that brings it."""
    body = (
        "By id: [TMA](hw-tma#box). By file: [TMEM](nvidia/tmem.md). Up and down: [barrier](./nvidia/../nvidia/mbarrier.md).\n\n"
        "Not yet: [later](later-page) and [later file](later.md). Elsewhere: [out](https://example.com/x.md), [top](#top).\n"
    )
    (web_wiki / "linker.md").write_text(f"---\nid: linker\ntitle: Linker\ntype: technique\n---\n{body}", encoding="utf-8")
    store = server.app.state.store
    store.reindex(web_wiki)
    text = client.get("/pages/linker").text
    assert 'href="/pages/hw-tma#box"' in text and 'href="/pages/hw-tmem"' in text and 'href="/pages/hw-mbarrier"' in text
    assert 'href="later-page"' in text and 'href="later.md"' in text  # no such page (yet): left as written
    assert 'href="https://example.com/x.md"' in text and 'href="#top"' in text
    (web_wiki / "later.md").write_text("---\nid: later-page\ntitle: Later\ntype: technique\n---\nHere now.\n", encoding="utf-8")
    store.reindex(web_wiki)
    text = client.get("/pages/linker").text
    assert text.count('href="/pages/later-page"') == 2  # by id and by file


def test_page_view_has_toc_panel_highlighting_and_links(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    text = client.get("/pages/web-demo").text
    assert 'href="#compile-only"' in text and 'id="compile-only"' in text  # table of contents
    assert 'id="snippet-1"' in text and 'id="snippet-3"' in text  # snippet anchors
    assert '<span class="kr">__global__</span>' in text  # highlighted by Pygments' CUDA lexer (a reserved keyword)
    assert "#include &lt;cstdio&gt;" not in text and "//!" not in text  # hidden setup lines stay hidden
    assert 'href="/a/DEMOK"' in text and 'href="/?arch=sm90a"' in text
    assert 'href="/pages/hw-tma"' in text and 'href="/pages/doc-ptx-isa"' in text  # related, sources
    assert "~</span> sketch (unverified)" in text
    assert "not yet verified on sm_90a" in text
    backlinks = client.get("/pages/hw-tma").text
    assert "Linked from" in backlinks and 'href="/pages/web-demo"' in backlinks
    # /wiki/<path> is the same page, pointing at its canonical address
    wiki = client.get("/wiki/web-demo.md").text
    assert '<link rel="canonical" href="/pages/web-demo">' in wiki and 'id="snippet-2"' in wiki


def test_page_badges_follow_the_evidence(server: Any, client: Any, snippets: list[dict[str, Any]]) -> None:
    compile_only, program = snippets[0], snippets[1]
    recs = typical(snippets) + [
        record(
            compile_only,
            "sm_100a",
            "compile",
            "fail",
            timestamp="2026-01-16T00:00:00Z",
            output='ptxas info: x\nkernel.cu(3): error: identifier "tmem" is undefined\n1 error detected',
        ),
    ]
    result = server.app.state.store.evidence.add(recs)
    assert not result.errors
    text = client.get("/pages/web-demo").text
    assert "✓</span> compiles on sm_90a" in text
    assert "✓</span> ran on NVIDIA H200" in text
    assert "✗</span> sm_100a: kernel.cu(3): error: identifier &#34;tmem&#34; is undefined" in text
    assert "⏸</span> not run: no SM100 GPU" in text
    assert "Resource usage" in text and "registers" in text
    # a newer record for other content makes the target stale; fresh evidence still wins over it
    newer = record(program, "sm_90a", "run", "pass", stale=True, timestamp="2026-06-01T00:00:00Z")  # past: not refused as future
    assert not server.app.state.store.evidence.add([newer]).errors
    assert "✓</span> ran on NVIDIA H200" in client.get("/pages/web-demo").text


def test_search_view_has_deep_links_highlights_facets_and_did_you_mean(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    text = client.get("/search", params={"q": "parity"}).text
    assert 'href="/pages/web-demo#parity-waits"' in text and "<mark>parity</mark>" in text.lower()
    assert 'href="/search?q=parity&amp;type=technique"' in text  # a facet link
    filtered = client.get("/search", params={"q": "memory", "type": "hardware"}).text
    assert "Remove filter type hardware" in filtered
    dym = client.get("/search", params={"q": "mbarier"}).text
    assert "Showing results for" in dym and "mbarrier" in dym


def test_dashboard_lists_failures_first_and_filters(server: Any, client: Any, snippets: list[dict[str, Any]]) -> None:
    server.app.state.store.evidence.add(
        typical(snippets)
        + [
            record(snippets[0], "sm_100a", "compile", "fail", timestamp="2026-01-16T00:00:00Z", output="error: boom"),
        ]
    )
    text = client.get("/evidence").text
    rows = text.split("<tbody>", 1)[1]
    assert rows.index('data-status="fail"') < rows.index('data-status="pass"')
    assert "2026-01-16 00:00 UTC" in text
    only_pass = client.get("/evidence", params={"status": "pass", "target": "sm_90a"}).text.split("<tbody>", 1)[1]
    assert 'data-status="pass"' in only_pass and 'data-status="fail"' not in only_pass and "sm_100a</code>" not in only_pass
    by_page = client.get("/evidence", params={"page": "evil"}).text.split("<tbody>", 1)[1]
    assert "web-demo" not in by_page


def test_graph_is_inline_svg_with_page_links(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    text = client.get("/graph").text
    assert "<svg" in text and 'href="/pages/hw-tma"' in text and 'data-a="hw-tmem"' in text


def test_author_text_is_escaped_everywhere(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    for url in ["/pages/evil", "/", "/search?q=evil", "/evidence", "/graph", "/a/evilalias"]:
        text = client.get(url, follow_redirects=True).text
        body = text.split("<main", 1)[1]
        assert "<script" not in body and "<img" not in body and "<svg onload" not in body, url
        assert 'href="javascript:' not in body.lower() and "onerror=" not in body.replace("onerror=&#34;", "").replace(
            "onerror=&quot;", ""
        ), url


def test_filters_without_words_list_pages_and_tags_filter_home(shared_client: Any) -> None:
    client = shared_client  # reads only: one server for the module
    listing = client.get("/search", params={"tag": "memory"}).text
    assert (
        "pages match these filters" in listing
        and 'href="/pages/hw-tma"' in listing
        and 'href="/pages/hw-mbarrier"' not in listing
    )
    home = client.get("/", params={"tag": "memory"}).text
    assert 'href="/pages/hw-tmem"' in home and 'href="/pages/hw-mbarrier"' not in home
    long = client.get("/search", params={"q": "tma " * 3000})
    assert long.status_code == 200  # cut, never refused


def test_an_unexpected_error_is_a_friendly_500_page(server: Any, client: Any) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("boom")

    server.app.state.store.pages.get_page = broken
    r = client.get("/pages/hw-tma")
    assert r.status_code == 500 and "Internal error" in r.text and "boom" not in r.text
    assert "content-security-policy" in r.headers


def test_the_code_colours_file_is_what_the_installed_pygments_generates() -> None:
    """app/static/code.css is generated by code_css(); after a Pygments upgrade, regenerate it."""
    from pathlib import Path

    from app.web.render import code_css

    css = (Path(__file__).resolve().parents[2] / "app" / "static" / "code.css").read_text(encoding="utf-8")
    header, _, body = css.partition("\n")
    assert header.startswith("/* Pygments colours (generated by app.web.render.code_css")
    assert body == code_css(), "app/static/code.css is stale: regenerate it from app.web.render.code_css()"
