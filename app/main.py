"""The app factory: settings in, a FastAPI app out, with its store on `app.state`.

The app listens at once: its lifespan opens the index (migrating it), starts
the `IndexKeeper` thread that indexes the wiki in the background (and watches
it with `watch`), and the web warm-up thread. `app.state.index_status` tells
`/api/health` where indexing stands. An extra worker of `serve --workers N`
(`read_only`) opens SQLite read-only and never indexes: the supervising
process does that, publishing its status to a file the workers read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from app.agents import install_agents
from app.api import artifacts, docs, evidence, health, pages, repository, search, snippets
from app.errors import broken_index_line, install_error_handlers
from app.search import SearchEngine, search_dir_for
from app.settings import Settings
from app.shutdown import quiet_cancellations
from app.store import Store
from app.tryrun.install import install_try
from app.watch import IndexKeeper, IndexStatus
from app.web import install_web
from app.web.warm import warm_up

log = logging.getLogger("kernelwiki")
SHUTDOWN_JOIN_S = 0.25
"""At shutdown, how long the app waits for the indexer thread."""
WARMER_JOIN_S = 2.0
"""At shutdown, the most the app waits for the page warm-up to stop between two pages (it usually takes one page)."""


def queue_changed_snippets(settings: Settings, store: Store, snippet_ids: list[str]) -> None:
    """On edit: queue verification jobs for snippets whose content is new, where a job queue is configured.

    The queue is opt-in (KERNELWIKI_QUEUE_DATABASE_URL); a queue that cannot be
    reached is logged, never fatal: the scheduler's sweep queues the same work later.
    """
    if not snippet_ids or settings.queue_database_url is None:
        return
    try:
        from app.queue.scheduler import enqueue_changed

        result = enqueue_changed(settings, store, snippet_ids)
        log.info("queued verification of %d changed snippet(s): %s", len(snippet_ids), result)
    except Exception as exc:  # noqa: BLE001 - the service must start without its queue
        log.warning("could not queue %d changed snippet(s): %s", len(snippet_ids), exc)


def read_only_url(url: str) -> str:
    """The same SQLite index opened read-only (other databases unchanged)."""
    if not url.startswith("sqlite") or "///" not in url:
        return url
    scheme, path = url.split("///", 1)
    if path.startswith("file:") or path in ("", ":memory:"):
        return url
    return f"{scheme}///file:{Path(path).resolve()}?mode=ro&uri=true"


def open_store(settings: Settings, read_only: bool = False) -> Store:
    """Open the index; a writer migrates it to the newest schema first. Raises on a damaged index."""
    url = read_only_url(settings.db) if read_only else settings.db
    store = Store(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_s,
        search_engine=SearchEngine(
            settings.search_cache_size,
            settings.search_typo_budget_s,
            settings.search_refresh_s,
            directory=settings.search_dir or search_dir_for(settings.db),
        ),
    )
    if not read_only:
        store.create_schema()
    elif url != settings.db:
        from app.index.db import make_engine

        # The one write an extra worker makes: storing posted evidence (short transactions, serialised by SQLite).
        store.evidence.writer = make_engine(settings.db, pool_size=1, max_overflow=2)
    return store


def prepare_store(settings: Settings) -> Store:
    """Open the index, index the wiki and load committed evidence, all before returning (benchmarks, the CLI)."""
    store = open_store(settings)
    if settings.index_on_start:
        report = store.reindex(settings.wiki)
        for d in report.diagnostics:
            log.warning("%s", d)
        queue_changed_snippets(settings, store, report.changed_snippets)
        loaded = store.evidence.load_dir(settings.evidence)
        for e in loaded.errors:
            log.warning("%s", e)
    return store


def keeper_for(settings: Settings, store: Store, status: IndexStatus) -> IndexKeeper:
    """The index-writing thread for `store` (not started)."""
    return IndexKeeper(settings, store, status, lambda ids: queue_changed_snippets(settings, store, ids))


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
        warmer = threading.Thread(target=warm_up, args=(app,), name="kernelwiki-web-warm-up", daemon=True)
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
        description="GPU kernel engineering facts whose snippets are compiled and run on real GPUs.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served from the package's own Swagger UI files under a CSP (app/api/docs.py)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.index_status = IndexStatus()
    for router in (search.router, pages.router, snippets.router, evidence.router, health.router, docs.router, repository.router):
        app.include_router(router)
    app.include_router(artifacts.router)  # kept SASS/PTX, diffs, the toolchain matrix (issue 24)
    search.install(app)  # the lean /api/search route, in front of the declared one
    install_agents(app)  # /llms.txt, /pages/{id}.md (before the HTML /pages/{id}), MCP at /mcp
    docs.install(app)
    install_error_handlers(app, install_web(app))
    install_try(app)  # POST /api/try, the editor, MCP compile_snippet/run_snippet (issue 27; off unless Settings.try_enabled)
    return app


def worker_app() -> FastAPI:
    """`serve --workers N`: one worker's app, from `KERNELWIKI_*` settings (read-only; the supervisor indexes).

    The worker ends when the `serve` process does, even one killed with SIGKILL (app/lifeline.py)."""
    from app.lifeline import exit_with_parent_from_env

    exit_with_parent_from_env()
    return create_app(Settings(read_only=True))
