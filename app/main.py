"""The app factory: settings in, a FastAPI app out, with its store on `app.state`."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import AsyncIterator

from fastapi import FastAPI

from app.agents import install_agents
from app.api import health, pages, search, snippets
from app.errors import install_error_handlers
from app.settings import Settings
from app.store import Store
from app.web import install_web

log = logging.getLogger("kernelwiki")


def queue_changed_snippets(settings: Settings, store: Store, snippet_ids: list[str]) -> None:
    """On edit: queue verification jobs for snippets whose content is new, where a job queue is configured.

    The queue is opt-in (KERNELWIKI_QUEUE_DATABASE_URL); a queue that cannot be
    reached is logged, never fatal: the scheduler's sweep queues the same work later.
    """
    if not snippet_ids or settings.queue_database_url is None:
        return
    try:
        from app.queue import enqueue_changed

        result = enqueue_changed(settings, store, snippet_ids)
        log.info("queued verification of %d changed snippet(s): %s", len(snippet_ids), result)
    except Exception as exc:  # noqa: BLE001 - the service must start without its queue
        log.warning("could not queue %d changed snippet(s): %s", len(snippet_ids), exc)


def prepare_store(settings: Settings) -> Store:
    """Open the index, create its schema, index the wiki and load committed evidence."""
    store = Store(settings.db)
    store.create_schema()
    if settings.index_on_start:
        report = store.reindex(settings.wiki)
        for d in report.diagnostics:
            log.warning("%s", d)
        queue_changed_snippets(settings, store, report.changed_snippets)
        loaded = store.evidence.load_dir(settings.evidence)
        for e in loaded.errors:
            log.warning("%s", e)
    return store


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    """Build the service; pass a prepared `store` to skip indexing at start."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if getattr(app.state, "store", None) is None:
            app.state.store = prepare_store(settings)
        yield
        app.state.store.engine.dispose()

    app = FastAPI(
        title="kernelwiki",
        description="GPU kernel engineering facts whose snippets are compiled and run on real GPUs.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.store = store
    for router in (search.router, pages.router, snippets.router, health.router):
        app.include_router(router)
    install_agents(app)  # /llms.txt, /pages/{id}.md (before the HTML /pages/{id}), MCP at /mcp
    install_error_handlers(app, install_web(app))
    return app
