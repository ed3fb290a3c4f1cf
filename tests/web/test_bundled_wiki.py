"""Every page of the bundled wiki/ in Chromium: it renders with no script error, no CSP
violation and no request leaving the server; and the screenshots the README shows.

Screenshots go to artifacts/screenshots/wiki-*.png; copy them to docs/screenshots/
after the wiki or the committed evidence changed. KERNELWIKI_SCREENSHOT_EVIDENCE
names another evidence folder (e.g. a fresh `kernelwiki verify --report` run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.web.conftest import shoot

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
SHOWCASE = ["hw-tmem", "hw-wgmma", "hw-tma"]  # the first that exists is photographed


def test_every_bundled_page_renders_cleanly_and_screenshots(browser: Any, tmp_path: Path) -> None:
    from app.main import create_app
    from app.settings import Settings

    assert any((REPO / "wiki").rglob("*.md")), "wiki/ has no pages: the bundled wiki is what this test checks"
    settings = Settings(
        wiki=REPO / "wiki",
        db=f"sqlite:///{tmp_path / 'index.db'}",
        evidence=Path(os.environ.get("KERNELWIKI_SCREENSHOT_EVIDENCE", REPO / "evidence")),
    )
    app = create_app(settings)
    with LiveServer(app) as server:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        tab = context.new_page()
        problems: list[str] = []
        tab.on("console", lambda m: problems.append(f"{tab.url}: {m.text}") if m.type in ("error", "warning") else None)
        tab.on("pageerror", lambda e: problems.append(f"{tab.url}: {e}"))
        tab.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith(server.url)
                else (problems.append(f"external: {r.request.url}"), r.abort())
            ),
        )
        ids = [
            p.id
            for p in app.state.store.pages.list_pages(
                __import__("app.index.filters", fromlist=["Filters"]).Filters(), limit=10_000
            ).pages
        ]
        for page_id in ids:
            response = tab.goto(f"{server.url}/pages/{page_id}")
            assert response is not None and response.status == 200, page_id
        assert problems == []
        tab.goto(server.url + "/")
        shoot(tab, "wiki-home")
        showcase = next((p for p in SHOWCASE if p in ids), ids[0])
        tab.goto(f"{server.url}/pages/{showcase}")
        # photograph the shortest verified block with its first evidence opened
        figure_id = tab.evaluate(
            "[...document.querySelectorAll('figure.snippet')].filter(f => f.querySelector('details.ev .badge.st-pass'))"
            ".sort((a, b) => a.offsetHeight - b.offsetHeight).map(f => f.id)[0] || ''"
        )
        if figure_id:
            tab.locator(f"#{figure_id} details.ev:has(.badge.st-pass) summary").first.click()
            # the end of the code, its badges and the opened record in view
            tab.evaluate(
                f"const ev = document.querySelector('#{figure_id} .evidence');"
                "window.scrollTo({top: window.scrollY + ev.getBoundingClientRect().top - 330, behavior: 'instant'})"
            )
        shoot(tab, "wiki-page")
        tab.goto(f"{server.url}/search?q=tcgen05.alloc")
        tab.keyboard.press("/")
        tab.keyboard.type("tcgen05.alloc")
        tab.locator("#qs-results [role=option]").first.wait_for()
        tab.keyboard.press("ArrowDown")
        shoot(tab, "wiki-search")
        tab.keyboard.press("Escape")
        tab.goto(server.url + "/evidence")
        shoot(tab, "wiki-evidence")
        tab.goto(server.url + "/graph")
        shoot(tab, "wiki-graph")
        assert problems == []
        context.close()
        phone = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", device_scale_factor=2)
        tab = phone.new_page()
        tab.goto(f"{server.url}/pages/{showcase}")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        shoot(tab, "wiki-page-phone-dark")
        phone.close()


# -- search over the bundled wiki: what engineers and agents type, keywords and questions --------------------

QUESTIONS = {
    # user stories: identifiers, aliases and SASS names
    "cp.async.bulk": "hw-tma",
    "TMEM": "hw-tmem",
    "tcgen05.mma": "hw-tcgen05-mma",
    "wgmma": "hw-wgmma",
    "UMMA": "hw-tcgen05-mma",
    "GMMA": "hw-wgmma",
    "mbarrier": "hw-mbarrier",
    "setmaxnreg": "hw-setmaxnreg",
    "tensor memory": "hw-tmem",
    "UTMALDG": "hw-tma",
    # plain-English questions: filler words must not force matches onto the wrong page
    "how do I allocate tensor memory": "hw-tmem",
    "what is the wgmma instruction shape": "hw-wgmma",
    "shared memory size": "hw-shared-memory",
    "what is the maximum dynamic shared memory per block": "hw-shared-memory",
    "how many registers can a warpgroup release": "hw-setmaxnreg",
    "how do I avoid bank conflicts in shared memory": "pattern-bank-conflicts",
    "how big is the L2 cache": "hw-l2-cache",
    "when should I use split-k": "technique-split-k",
    "what does tcgen05.ld read": "hw-tmem",
}


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from app.store import Store

    assert any((REPO / "wiki").rglob("*.md")), "wiki/ has no pages: the bundled wiki is what this test checks"
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('bundled') / 'index.db'}")
    store.create_schema()
    store.reindex(REPO / "wiki")
    yield store
    store.engine.dispose()


@pytest.mark.parametrize("query,page", QUESTIONS.items())
def test_the_bundled_wiki_answers_what_users_type(bundled, query: str, page: str) -> None:  # type: ignore[no-untyped-def]
    from app.index.filters import Filters

    result = bundled.searcher.search(query, Filters())
    assert result.results and result.results[0].id == page, (query, [r.id for r in result.results[:3]])
    top = result.results[0]
    assert top.section is not None and top.snippet.strip()


@pytest.mark.parametrize("label", ["sm90a", "SM90", "sm_100a", "sm100a"])
def test_architecture_labels_as_the_ui_shows_them_find_pages(bundled, label: str) -> None:  # type: ignore[no-untyped-def]
    from app.index.filters import Filters

    assert bundled.searcher.search(label, Filters()).total >= 5


def test_bundled_hits_always_have_a_section_an_excerpt_and_whole_word_marks(bundled) -> None:  # type: ignore[no-untyped-def]
    import re

    from app.index.filters import Filters

    for query in list(QUESTIONS) + ["TMA", "sm_100a", "swizzle", "cluster", "fence.proxy.async"]:
        for r in bundled.searcher.search(query, Filters(), limit=100).results:
            assert r.section is not None and r.snippet.strip(), (query, r.id)
            for m in re.finditer(r"(\w?)<mark>(.*?)</mark>(\w?)", r.snippet):
                assert not m.group(1) and not m.group(3), (query, r.id, r.snippet)
