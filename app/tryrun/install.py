"""`install_try(app)`: the try routes, the editor, the MCP try tools and, when try runs are on, the service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from app.settings import Settings
from app.tryrun.service import Dispatcher, TryService, queue_wanted


def make_service(settings: Settings) -> TryService:
    """The try service of `settings`: its own small connection pool to the index database, and the local pool
    or the job queue as `queue_wanted` says. Nothing is connected or started until the first try run."""
    from app.index.db import make_engine
    from app.tryrun.store import TryResults

    engine = make_engine(settings.db, pool_size=2, max_overflow=8)
    dispatcher: Dispatcher
    if queue_wanted(settings):
        from app.tryrun.queue_dispatch import QueueDispatcher

        dispatcher = QueueDispatcher(settings)
    else:
        from app.tryrun.pool import LocalPool

        dispatcher = LocalPool(settings, TryResults(engine))
    return TryService(settings, engine, dispatcher)


def install_try(app: FastAPI) -> None:
    """Add POST /api/try, GET /api/try/{id}, /try and /try/{id} (they answer 404 while try runs are off), the
    "Edit & run" button of the page view, and, when on, the service and the MCP tools compile_snippet/run_snippet."""
    from app.tryrun.routes import router as api_router
    from app.tryrun.views import router as web_router

    settings: Settings = app.state.settings
    app.include_router(api_router)
    app.include_router(web_router)
    app.state.tryrun = None
    web = getattr(app.state, "web", None)
    if web is not None:
        web.env.globals["try_enabled"] = settings.try_enabled
    if not settings.try_enabled:
        return
    service = make_service(settings)
    app.state.tryrun = service
    server = getattr(app.state, "mcp_server", None)
    if server is not None:
        from app.tryrun.mcp_tools import add_try_tools

        add_try_tools(server, lambda: getattr(app.state, "tryrun", None))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        try:
            async with inner(a) as state:
                yield state
        finally:
            service.close()

    app.router.lifespan_context = lifespan
