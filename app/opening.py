"""Opening the index for a command or the app factory, without the web stack: `kernelwiki index`, `search`,
`verify` and `evidence` open it here and never import FastAPI (app.main re-exports these for the app factory)."""

from __future__ import annotations

import logging
from pathlib import Path

from app.search import SearchEngine, search_dir_for
from app.settings import Settings
from app.store import Store

log = logging.getLogger("kernelwiki")


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
        wiki=settings.wiki,
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
