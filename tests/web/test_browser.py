"""The docs browser in a real headless Chromium: evidence badges, keyboard search, aliases,
the dashboard's filters, and pages that try to inject script."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from app.web.badges import rank
from bench.records import record, typical
from tests.web.conftest import shoot

pytestmark = pytest.mark.browser


def test_page_shows_evidence_badges_that_open_to_the_log(server: Any, page: Any, snippets: list[dict[str, Any]]) -> None:
    server.app.state.store.evidence.add(
        typical(snippets)
        + [
            record(
                snippets[0],
                "sm_100a",
                "compile",
                "fail",
                timestamp="2026-01-16T00:00:00Z",
                output='kernel.cu(3): error: identifier "tmem" is undefined\n1 error detected in the compilation',
            ),
        ]
    )
    page.goto(f"{server.url}/pages/web-demo")
    first = page.locator("#snippet-1")
    assert first.locator(".badge", has_text="compiles on sm_90a").is_visible()
    failed = first.locator(".badge", has_text='sm_100a: kernel.cu(3): error: identifier "tmem" is undefined')
    assert failed.is_visible()
    log = first.locator("pre.log", has_text="1 error detected in the compilation")
    assert not log.is_visible()
    failed.click()  # <details> opens without any script
    assert log.is_visible()
    second = page.locator("#snippet-2")
    assert second.locator(".badge", has_text="ran on NVIDIA H200").is_visible()
    assert second.locator(".badge", has_text="not run: no SM100 GPU").is_visible()
    assert page.locator("#snippet-3 .badge", has_text="sketch (unverified)").is_visible()
    second.locator(".badge", has_text="ran on NVIDIA H200").click()
    assert second.get_by_text("compute capability 9.0").is_visible()
    assert page.external == []
    shoot(page, "page")


def test_keyboard_search_opens_a_result_at_its_section(server: Any, page: Any) -> None:
    page.goto(server.url + "/")
    shoot(page, "home")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("parity waits")
    options = page.locator("#qs-results [role=option]")
    options.first.wait_for()
    assert "Parity waits" in options.first.inner_text()
    page.keyboard.press("ArrowDown")
    assert options.first.get_attribute("aria-selected") == "true"
    shoot(page, "search-as-you-type")
    page.keyboard.press("Enter")
    page.wait_for_url("**/pages/web-demo#parity-waits")
    expect(page.locator("#parity-waits")).to_be_in_viewport()
    # Ctrl+K focuses the box from anywhere; Enter without a pick opens the full results page
    page.keyboard.press("Control+k")
    page.keyboard.type("tma")
    page.keyboard.press("Enter")
    page.wait_for_url("**/search?q=tma")
    assert page.locator(".result-title").first.is_visible()
    shoot(page, "search")
    assert page.external == []


def test_following_an_alias_and_an_unknown_one(server: Any, page: Any) -> None:
    page.goto(f"{server.url}/pages/hw-tma")
    page.locator(".panel a.alias", has_text="cp.async.bulk.tensor").click()
    page.wait_for_url("**/pages/hw-tma")
    page.goto(f"{server.url}/a/TMEM")
    assert page.url.endswith("/pages/hw-tmem")
    assert page.locator("h1#page-title").inner_text() == "Tensor Memory (TMEM)"
    response = page.goto(f"{server.url}/a/no-such-thing")
    assert response.status == 404 and page.locator("h1", has_text="Not found").is_visible()
    assert page.locator("#err-q").input_value() == "no such thing"


def test_filtering_the_evidence_dashboard(server: Any, page: Any, snippets: list[dict[str, Any]]) -> None:
    server.app.state.store.evidence.add(
        typical(snippets)
        + [
            record(snippets[0], "sm_100a", "compile", "fail", timestamp="2026-01-16T00:00:00Z", output="error: boom"),
        ]
    )
    page.goto(f"{server.url}/evidence")
    rows = page.locator(".ev-table > tbody > tr")
    order = [rows.nth(i).get_attribute("data-status") for i in range(rows.count())]
    assert order[:2] == ["error", "fail"] and order[-1] == "pass"  # the evil page's invalid block, then the failure
    assert order == sorted(order, key=rank)
    page.select_option("#f-status", "pass")
    page.select_option("#f-target", "sm_90a")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/evidence?status=pass&target=sm_90a&page=")
    statuses = {rows.nth(i).get_attribute("data-status") for i in range(rows.count())}
    assert statuses == {"pass"} and rows.count() == 2
    page.select_option("#f-status", "")
    page.select_option("#f-target", "")
    page.select_option("#f-page", "web-demo")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**page=web-demo")
    assert rows.count() == 5  # 2 compiled blocks × 2 targets + the sketch


def test_injection_attempts_run_no_script(server: Any, page: Any) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"{server.url}/pages/evil")
    assert page.locator("h1#page-title").inner_text().startswith("<script>window.__pwned")  # shown as text
    for link in page.locator("a").all():
        assert not (link.get_attribute("href") or "").lower().startswith(("javascript:", "data:"))
    page.locator(".badge").first.click()
    page.goto(f"{server.url}/pages/evil")
    assert page.locator("a", has_text="click me").count() == 0  # a javascript: link is printed, never made a link
    page.get_by_text("[click me](javascript:alert('link'))").click()
    for url in ["/search?q=evil", "/evidence?page=evil", "/graph", "/a/evilalias", "/"]:
        page.goto(server.url + url)
    assert page.url == server.url + "/"  # so the wait below waits for the hit to open, not for the alias redirect
    page.keyboard.press("/")
    page.keyboard.type("evil")
    page.locator("#qs-results [role=option]").first.wait_for()
    page.keyboard.press("ArrowDown")  # pick the first hit (Enter alone runs the full search)
    page.keyboard.press("Enter")  # open it, at the matching section
    page.wait_for_url(re.compile(r"/pages/evil(#[\w-]+)?$"))
    page.goto(f"{server.url}/graph")
    page.locator("a.node[data-id=evil]").focus()  # the graph's node for the page, its title in an aria-label
    page.keyboard.press("Enter")
    page.wait_for_url("**/pages/evil")
    page.wait_for_load_state("load")  # every script of the page has run …
    page.wait_for_load_state("networkidle")  # … and nothing it started is still loading
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))")  # queued tasks ran too
    assert dialogs == [] and page.evaluate("typeof window.__pwned") == "undefined"
    assert page.external == []


def test_reading_without_javascript_and_on_a_phone(browser: Any, server: Any, snippets: list[dict[str, Any]]) -> None:
    server.app.state.store.evidence.add(typical(snippets))
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844}, color_scheme="dark")
    tab = context.new_page()
    tab.goto(f"{server.url}/pages/web-demo")
    assert tab.locator("#snippet-2 .badge", has_text="ran on NVIDIA H200").is_visible()
    assert tab.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    tab.locator(".toc-mobile summary").click()
    tab.locator(".toc-mobile a", has_text="Parity waits").click()
    assert tab.url.endswith("#parity-waits")
    shoot(tab, "page-phone-dark")
    tab.goto(f"{server.url}/search?q=tma")
    assert tab.locator(".result-title").count() >= 1
    context.close()


A11Y = (Path(__file__).parent / "a11y.js").read_text()


def test_landmarks_labels_focus_and_contrast_in_both_themes(browser: Any, server: Any, snippets: list[dict[str, Any]]) -> None:
    server.app.state.store.evidence.add(
        typical(snippets) + [record(snippets[0], "sm_100a", "compile", "fail", output="error: x")]
    )
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
        tab = context.new_page()
        for url in ["/", "/pages/web-demo", "/search?q=tma", "/evidence", "/graph", "/pages/missing"]:
            tab.goto(server.url + url)
            tab.locator("details.ev summary").first.click() if url == "/pages/web-demo" else None
            facts = tab.evaluate(A11Y)
            where = f"{url} ({scheme})"
            assert facts["main"] == 1 and facts["h1"] == 1 and facts["banner"] == 1 and facts["lang"] == "en", where
            assert facts["navsUnlabelled"] == 0 and facts["imagesWithoutAlt"] == 0 and facts["unlabelled"] == [], (where, facts)
            assert facts["lowContrast"] == [], (where, facts["lowContrast"])
        tab.goto(server.url + "/pages/web-demo")
        tab.keyboard.press("Tab")  # the skip link comes first and shows itself when focused
        assert tab.evaluate("document.activeElement.className") == "skip"
        assert tab.evaluate("document.activeElement.getBoundingClientRect().top") >= 0
        tab.keyboard.press("Tab")
        outline = tab.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline not in ("none", ""), "focused links must show an outline"
        context.close()
