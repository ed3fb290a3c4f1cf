"""The app factory: settings in, a FastAPI app out, with its store on `app.state`.

The app listens at once: its lifespan opens the index (migrating it), starts
the `IndexKeeper` thread that indexes the wiki in the background (and watches
it with `watch`), and the web warm-up thread. `app.state.index_status` tells
`/api/health` where indexing stands. An extra worker of `serve --workers N`
(`read_only`) opens SQLite read-only and never indexes: the supervising
process does that, publishing its status to a file the workers read.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.agents import install_agents
from app.agents.cache import RenderedDocuments, documents_dir
from app.agents.routes import llms_txt_of, warm_llms_txt
from app.api import artifacts, docs, evidence, health, pages, repository, search, snippets
from app.errors import broken_index_line, install_error_handlers
from app.opening import open_store, prepare_store, queue_changed_snippets, read_only_url
from app.settings import Settings
from app.shutdown import quiet_cancellations
from app.store import Store
from app.tryrun.install import install_try
from app.watch import IndexKeeper, IndexStatus
from app.web import install_web
from app.web.warm import warm_up

__all__ = ["create_app", "keeper_for", "open_store", "prepare_store", "queue_changed_snippets", "read_only_url"]
log = logging.getLogger("kernelwiki")
SHUTDOWN_JOIN_S = 0.25
"""At shutdown, how long the app waits for the indexer thread."""
WARMER_JOIN_S = 2.0
"""At shutdown, the most the app waits for the page warm-up to stop between two pages (it usually takes one page)."""


def keeper_for(settings: Settings, store: Store, status: IndexStatus) -> IndexKeeper:
    """The index-writing thread for `store` (not started). After each index it renders /llms.txt of the new
    generation into the file the serving processes share (app/agents/cache.py), so no worker pays for it: at
    100,000 pages a worker that rendered it kept ~70 MB more heap than the others, for good."""
    documents = RenderedDocuments(lambda: documents_dir(store.search_engine.directory))

    def render_llms_txt() -> None:
        with store.engine.connect() as conn:
            llms_txt_of(store.pages, documents, conn)

    return IndexKeeper(settings, store, status, lambda ids: queue_changed_snippets(settings, store, ids), render_llms_txt)


def _warm_up(app: FastAPI) -> None:
    """The start-up warm-up: the docs browser's (app/web/warm.py), then /llms.txt, then the objects made so far
    frozen out of the garbage collector's way (`gc.freeze`): a full collection then scans only what requests
    made since, which halved the first /llms.txt after a start at 10,000 pages (270-290 -> 110-150 ms)."""
    try:
        warm_up(app)
        if app.state.web.closing.is_set() or app.state.store is None or app.state.index_status.state != "ok":
            return  # shutting down, no index, or still indexing: nothing more to warm, nothing settled to freeze
        if not app.state.settings.read_only:  # a worker of `serve --workers N` finds it rendered by `serve` (`keeper_for`)
            try:
                warm_llms_txt(app)
            except Exception:  # warming is an optimisation: never let it take the app down
                log.warning("warming /llms.txt failed", exc_info=True)
        gc.collect()
        gc.freeze()
        _return_free_heap()
    finally:
        app.state.warm_done.set()


def _return_free_heap() -> None:
    """Give the heap memory freed after the warm-up back to the system (glibc's `malloc_trim`; elsewhere nothing).

    Rendering the warm-up's pages and /llms.txt leaves freed memory that glibc keeps for later: at 100,000 pages
    a worker held ~24 MB more than it used (measured 2026-12-04: anonymous memory 154 -> 130 MB after the trim)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def import_what_serving_uses(settings: Settings) -> None:
    """Import (no I/O) what the app otherwise imports on its first requests: the database's SQLAlchemy dialect,
    anyio's asyncio backend (FastAPI's thread pool), the code blocks' lexers, compiled. `serve --workers N`' zygote
    calls it before it forks the workers, so their code is shared rather than imported by each (found by comparing
    `sys.modules` of the zygote and of a worker that had served: 34 modules; ~5 MB less of its own per worker at
    10,000 pages, docs/benchmarks.md)."""
    import importlib

    from sqlalchemy.engine import make_url

    from app.web.render import compile_lexers

    try:
        make_url(settings.db).get_dialect()
    except Exception:  # noqa: BLE001 - an optimisation: a bad URL fails where `serve` opens the index, with its message
        pass
    try:
        importlib.import_module("anyio._backends._asyncio")  # a private module: where it moves, it is imported later
    except ImportError:
        pass
    compile_lexers()


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    """Build the service; pass a prepared `store` to skip indexing at start."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        status: IndexStatus = app.state.index_status
        keeper: IndexKeeper | None = None
        quiet_cancellations()  # uvicorn has configured logging by now
        if app.state.store is None:
            try:
                app.state.store = open_store(settings, read_only=settings.read_only)
            except Exception as exc:
                line = broken_index_line(settings.db, exc)
                if line is None:
                    raise
                status.degrade(line)  # still listen: /api/health answers 503 with the fix
        if app.state.store is not None:
            if store is not None or settings.read_only:
                status.update(state="ok")
            else:
                keeper = keeper_for(settings, app.state.store, status).start()
        warmer = threading.Thread(target=_warm_up, args=(app,), name="kernelwiki-web-warm-up", daemon=True)
        warmer.start()
        try:
            yield
        finally:
            app.state.web.closing.set()
            # The warm-up stops between two pages: wait for it (up to WARMER_JOIN_S) before the pool is disposed,
            # or the connection of the page it is on leaks into a disposed pool (a ResourceWarning in a clean-clone
            # CI run, twice: with 2 s and with 0.25 s here). The indexer is waited for briefly, never for its work
            # (a reindex's transaction, which SQLite rolls back), so SIGTERM under load ends soon after the grace.
            warmer.join(timeout=WARMER_JOIN_S)
            if keeper is not None:
                keeper.stop(timeout=SHUTDOWN_JOIN_S)
            if app.state.store is not None:
                app.state.store.engine.dispose()

    app = FastAPI(
        title="kernelwiki",
        description="GPU kernel engineering facts, each code snippet with its verification evidence: compiled for "
        "which architecture, run on which GPU, or not.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served from the package's own Swagger UI files under a CSP (app/api/docs.py)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.index_status = IndexStatus()
    app.state.warm_done = threading.Event()  # set when the start-up warm-up (`_warm_up`) ended
    for router in (search.router, pages.router, snippets.router, evidence.router, health.router, docs.router, repository.router):
        app.include_router(router)
    app.include_router(artifacts.router)  # kept SASS/PTX, diffs, the toolchain matrix (issue 24)
    search.install(app)  # the lean /api/search route, in front of the declared one
    install_agents(app)  # /llms.txt, /pages/{id}.md (before the HTML /pages/{id}), MCP at /mcp
    docs.install(app)
    install_error_handlers(app, install_web(app))
    install_try(app)  # POST /api/try, the editor, MCP compile_snippet/run_snippet (issue 27; off unless Settings.try_enabled)
    return app
