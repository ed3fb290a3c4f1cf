"""`Store`: the wiring of one database's services, a thin façade with no logic of its own.

It opens the engine and builds the concern services over it, which routes, views and MCP tools depend on
one by one (app/deps.py): `pages` (app/pages.py), `searcher` (app/search/searcher.py), `evidence`
(app/evidence/store.py) and `health` (app/health.py). What it does itself is wiring: creating the schema and
reindexing, which keeps the SQL index and this process's full-text index in step.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from app.evidence.store import EvidenceStore, status_without_evidence
from app.health import Health
from app.index.build import IndexReport, reindex
from app.index.db import create_schema, make_engine
from app.index.lookup import RepositoryFiles
from app.pages import Pages
from app.search import SearchEngine, Searcher, search_dir_for


class Store:
    """The services over one database URL: `engine`, `evidence`, `search_engine`, `searcher`, `pages`, `health`."""

    def __init__(
        self,
        url: str,
        pool_size: int | None = None,
        max_overflow: int | None = None,
        pool_timeout: float | None = None,
        search_engine: SearchEngine | None = None,
        wiki: Path | None = None,
    ) -> None:
        self.url = url
        self.engine: Engine = make_engine(url, pool_size=pool_size, max_overflow=max_overflow, pool_timeout=pool_timeout)
        self.evidence = EvidenceStore(self.engine)
        self.search_engine = search_engine or SearchEngine(directory=search_dir_for(url))
        self.searcher = Searcher(self.engine, self.search_engine)
        self.pages = Pages(self.engine, self.evidence, files=RepositoryFiles.of(wiki) if wiki is not None else None)
        self.health = Health(self.engine, self.evidence)

    def create_schema(self) -> None:
        create_schema(self.engine)
        self.evidence.judge_missing()  # statuses of an index from before migration 0009, once

    def reindex(self, root: Path, force: bool = False, full_text: bool = True) -> IndexReport:
        """Reindex the wiki into SQL, then bring this process's full-text index in line (changed pages only); the
        pages service then names files as `root`'s repository does (`page.file`).

        `full_text=False` for a process that will not search (the CLI's `index`): the first serving
        process builds the host's full-text index from the SQL rows (app/search/sync.py).
        """
        self.pages.files = RepositoryFiles.of(root)
        if not full_text:
            return reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses, fresh=status_without_evidence)
        with self.search_engine.writing():  # searches meanwhile ask for the generation, so none answers stale after the commit
            report = reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses, fresh=status_without_evidence)
            with self.engine.connect() as conn:
                self.search_engine.sync(conn)
        return report
