"""Warming the docs browser in the background, so no reader pays for first-time work.

Compiling the templates and the Pygments lexers' regexes costs ~150 ms once;
highlighting a page's code costs 10-100 ms per page. A daemon thread started
by `install_web` does the first right away and, once the app's store is
ready, renders up to `PRERENDER_PAGES` page bodies into the cache.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.store import Filters
from app.web.render import highlight_code
from app.web.state import LRU, WebState

log = logging.getLogger("kernelwiki")
PRERENDER_PAGES = 200
STORE_WAIT_S = 120.0


def warm_up(app: Any) -> None:
    """Compile templates and lexers, then pre-render page bodies when the store appears."""
    state: WebState = app.state.web
    try:
        for name in state.env.list_templates(filter_func=lambda n: n.endswith(".html")):
            state.env.get_template(name)
        for lang in ("cuda", "cpp", "ptx", "python"):
            highlight_code("int main() { return 0; } // warm-up\n", lang, LRU(1))
    finally:
        state.warmed.set()
    try:
        deadline = time.monotonic() + STORE_WAIT_S
        while getattr(app.state, "store", None) is None:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        from app.web.views import page_view

        for page in app.state.store.list_pages(Filters(), limit=PRERENDER_PAGES).pages:
            page_view(app.state.store, state, page.id)
    except Exception:  # warming is an optimisation: never let it take the app down
        log.warning("pre-rendering pages failed", exc_info=True)
    finally:
        state.prerendered.set()
