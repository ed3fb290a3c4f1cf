"""Warming the docs browser in the background, so no reader pays for first-time work.

Compiling the templates and the Pygments lexers' regexes costs ~150 ms once;
highlighting a page's code costs 10-100 ms per page. A daemon thread started
by the app's lifespan (app/main.py) does the first right away and, once the
first index is done, draws `/graph` (its SQL and layout) and renders up to
`PRERENDER_PAGES` page bodies into the cache.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.cache import LRU
from app.index.filters import Filters
from app.web.render import highlight_code
from app.web.state import WebState

log = logging.getLogger("kernelwiki")
PRERENDER_PAGES = 200
PAUSE_S = 0.02
"""Rest between two pre-rendered pages, so the event loop serving requests gets the GIL back: a thread rendering
page after page starves it (a benchmark whose requests overlapped the start-up work saw 4 search answers/s)."""
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
        ready = getattr(app.state, "index_status", None)
        deadline = time.monotonic() + STORE_WAIT_S
        while ready is not None and not ready.ready.wait(0.2):
            if state.closing.is_set() or time.monotonic() > deadline:
                return  # shutting down, or still indexing after two minutes: pages render on first view instead
        if getattr(app.state, "store", None) is None or getattr(ready, "state", "ok") == "degraded":
            return
        from app.web.views import graph_drawing, page_view

        store = app.state.store
        with store.engine.connect() as conn:  # this thread's own connection, given back when warming ends
            store.search_engine.sync(conn)  # a worker opens the host's full-text index now, not on a reader's search
            graph_drawing(state, store.pages, conn, None)  # /graph: the most-linked pages' SQL and layout (~60 ms at 10k pages)
            for page in store.pages.list_pages(Filters(), limit=PRERENDER_PAGES, conn=conn, facets=False).pages:
                if state.closing.wait(PAUSE_S):
                    return  # the app is shutting down: give the connection back before its pool is disposed
                page_view(store.pages, state, page.id, conn)
    except Exception:  # warming is an optimisation: never let it take the app down
        log.warning("pre-rendering pages failed", exc_info=True)
    finally:
        state.prerendered.set()
