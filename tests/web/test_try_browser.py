"""The try editor in a real headless Chromium: from a page's "Edit & run" to a streamed result, by keyboard, and the
same form without JavaScript (issue 27)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from runner.sandbox import ISOLATION_BWRAP, isolation_problem

pytestmark = pytest.mark.browser


@pytest.fixture
def settings(db_url: str, web_wiki: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The browser suite's service, with try runs on (local pool; no GPU here: compile-only)."""
    from app.settings import Settings

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    return Settings(
        wiki=web_wiki, db=db_url, evidence=evidence, runner_token="test-runner-token", try_enabled=True, try_dir=tmp_path / "try"
    )


def test_edit_and_run_streams_a_sandboxed_build_by_keyboard_and_works_without_javascript(
    server: Any, page: Any, browser: Any
) -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        pytest.skip(f"bubblewrap unusable here: {problem}")
    from app.tryrun.tokens import create_token

    token = create_token(server.app.state.tryrun.engine, "browser-user")
    page.goto(f"{server.url}/pages/web-demo")
    link = page.locator("a", has_text="Edit & run").first
    assert link.get_attribute("href") == "/try?snippet=web-demo%3A1"
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/try?snippet=web-demo*")
    source = page.locator("#try-source")
    assert "__global__ void kernel(int* p)" in source.input_value()
    assert page.locator("input[name=targets][value=sm_90a]").is_checked()
    assert page.locator("input[name=targets][value=sm_100a]").is_checked()
    # Tab indents inside the editor; Escape, then Tab, leaves it
    source.focus()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.type("// edited in the browser")
    assert source.input_value().endswith("\n    // edited in the browser")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "try-lang"
    # Compiler Explorer: a link built in the page from the edited code, never requested from here
    ce = page.locator("[data-try-ce]").get_attribute("href") or ""
    assert ce.startswith("https://godbolt.org/clientstate/")
    state = json.loads(base64.b64decode(ce.rsplit("/", 1)[1].replace("_", "/").replace("-", "+")))
    assert state["sessions"][0]["source"].endswith("// edited in the browser")
    assert state["sessions"][0]["compilers"][0]["options"] == "-arch=sm_90a"
    edited = source.input_value()
    # one target, the token, Run by keyboard
    page.locator("input[name=targets][value=sm_100a]").uncheck()
    page.locator("#try-token").fill(token)
    page.locator("[data-try-run]").focus()
    page.keyboard.press("Enter")
    status = page.locator("[data-try-status]")
    status.filter(has_text="Done:").wait_for(timeout=240_000)
    events = page.locator("[data-try-events] li").all_inner_texts()
    assert events == ["queued", "compiling sm_90a", "done"]
    assert "nvcc" in page.locator("[data-try-log]").inner_text()
    assert "kernel" in page.locator("[data-try-sass]").inner_text()
    assert page.locator("[data-try-records] li", has_text="sm_90a compile: pass").is_visible()
    share = page.locator("[data-try-share]").get_attribute("href") or ""
    assert share.startswith("/try/") and page.evaluate("document.activeElement.id") == "h-try-result"
    assert page.external == []
    # the share page shows it again
    page.goto(server.url + share)
    assert page.locator("h1", has_text="Try run").is_visible() and "not page evidence" in page.content()
    # without JavaScript: the same form posts to /try, which waits and shows the share page (the stored result)
    context = browser.new_context(java_script_enabled=False)
    plain = context.new_page()
    plain.set_default_timeout(240_000)
    plain.goto(f"{server.url}/try?snippet=web-demo:1")
    plain.locator("#try-source").fill(edited)
    plain.locator("input[name=targets][value=sm_100a]").uncheck()
    plain.locator("#try-token").fill(token)
    plain.locator("[data-try-run]").click()
    plain.wait_for_url("**/try/*")
    assert plain.locator("table.try-records td", has_text="compile").first.is_visible()
    wrong = context.new_page()
    wrong.goto(f"{server.url}/try?snippet=web-demo:1")
    wrong.locator("#try-attributes").fill('flags="$(id)"')
    wrong.locator("#try-token").fill(token)
    wrong.locator("[data-try-run]").click()
    assert wrong.locator("#try-problems", has_text="attributes").is_visible()
    context.close()
