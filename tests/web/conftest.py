"""Browser-test fixtures: the app on a free port over a temp wiki, and a headless Chromium.

The fixture wiki (tests/fixtures/wiki) gets two more pages here: one with
snippets in every mode, and one whose front matter and body try to inject
script. Only the SQLite backend is used: the views read through `Store`, whose
backends the shared suite already checks.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_WIKI, LiveServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("KERNELWIKI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]

DEMO_PAGE = """---
id: web-demo
title: Demo kernels for the browser
type: technique
architectures: [sm90a, sm100a]
tags: [demo, async-copy]
aliases: [demo kernels, DEMOK]
confidence: verified
evidence_level: experiment
related: [hw-tma, hw-tmem]
sources: [doc-ptx-isa]
---
# Demo kernels

Three blocks in three modes.

## Compile only

```cuda
__global__ void kernel(int* p) { p[threadIdx.x] = 1; }
```

## Running a program

```cuda run output="OK"
//! #include <cstdio>
__global__ void empty() {}
int main() { empty<<<1, 1>>>(); cudaDeviceSynchronize(); printf("OK\\n"); return 0; }
```

## A sketch

```ptx sketch
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [addr], 32;
```

## Parity waits

Waiting on the phase parity with `mbarrier.try_wait.parity` lets a consumer spin cheaply.
"""

EVIL_PAGE = """---
id: evil
title: "<script>window.__pwned = 'title'; alert('title')</script> Evil <img src=x onerror=\\"window.__pwned='img'\\">"
type: concept
tags: ["<svg onload=alert('tag')>"]
aliases: ["\\"><script>alert('alias')</script>", "javascript:alert('alias')", evilalias]
url: "javascript:alert('url')"
related: ["javascript:alert(1)"]
note: "<b onmouseover=alert('extra')>extra</b>"
---
# Evil <script>alert('heading')</script>

<script>window.__pwned = 'body'; alert('body')</script>

<img src=x onerror="window.__pwned='raw'; alert('raw')">

[click me](javascript:alert('link')) and [data](data:text/html,<script>alert(1)</script>) and
<a href="javascript:alert('a')">raw link</a>

![pic](javascript:alert('img'))

```cuda </code><script>alert('info')</script>
__global__ void k() {} // </code></pre><script>alert('code')</script>
```
"""


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only for the browser suite."""
    return f"sqlite:///{tmp_path / 'index.db'}"


@pytest.fixture
def web_wiki(wiki_dir: Path) -> Path:
    (wiki_dir / "web-demo.md").write_text(DEMO_PAGE, encoding="utf-8")
    (wiki_dir / "evil.md").write_text(EVIL_PAGE, encoding="utf-8")
    return wiki_dir


@pytest.fixture
def server(settings: Any, web_wiki: Path) -> Iterator[Any]:
    """The app on a free port; `server.app.state.store` is its index."""
    from app.main import create_app

    app = create_app(settings)
    with LiveServer(app) as srv:
        srv.app = app  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`server`, once per module (and xdist worker) for the views tests that only read: one start and one index
    instead of one per test. A test that adds evidence, edits the wiki or patches the app takes `server`."""
    from app.main import create_app
    from app.settings import Settings

    folder = tmp_path_factory.mktemp("shared-web")
    wiki = Path(shutil.copytree(FIXTURE_WIKI, folder / "wiki"))
    (wiki / "web-demo.md").write_text(DEMO_PAGE, encoding="utf-8")
    (wiki / "evil.md").write_text(EVIL_PAGE, encoding="utf-8")
    (folder / "evidence").mkdir()
    settings = Settings(
        wiki=wiki, db=f"sqlite:///{folder / 'index.db'}", evidence=folder / "evidence", runner_token="test-runner-token"
    )
    app = create_app(settings)
    with LiveServer(app) as srv:
        srv.app = app  # type: ignore[attr-defined]
        yield srv


@pytest.fixture
def snippets(server: Any) -> list[dict[str, Any]]:
    """The demo page's snippets as the API returns them (ids, targets, content hashes)."""
    import httpx

    return httpx.get(f"{server.url}/api/snippets", params={"page": "web-demo"}).json()["snippets"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"Chromium is required in CI but {CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    """A fresh tab that refuses (and records) any request leaving the test server."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    tab.external = []  # type: ignore[attr-defined]

    def guard(route: Any) -> None:
        if route.request.url.startswith(server.url) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            tab.external.append(route.request.url)  # type: ignore[attr-defined]
            route.abort()

    tab.route("**/*", guard)
    yield tab
    context.close()


def shoot(tab: Any, name: str, full_page: bool = False) -> Path:
    """Save a screenshot as a test artefact under artifacts/screenshots/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    tab.screenshot(path=str(path), full_page=full_page)
    return path
