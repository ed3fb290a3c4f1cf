"""`Searcher`: the search concern's service: ranked, filtered search, and the filter values no page can have.

Both ask this process's full-text index (app/search/engine.py), which follows the SQL index's generation:
given a connection, they bring it up to date first (at most every `refresh_s` of the engine). A caller that
must not wait on that (the service's event loop) asks `catch_up` for it in the background instead, waits on it
at most `CATCH_UP_WAIT_S`, and searches with `sync=False`.
"""

from __future__ import annotations

from concurrent.futures import Future, TimeoutError as FutureTimeout

from sqlalchemy.engine import Connection, Engine

from app.errors import SearchNotReady
from app.index.db import connected
from app.index.facets import FILTER_FACETS
from app.index.filters import FilterProblem, Filters, normalize_arch
from app.schemas import SearchPublic
from app.search.engine import SearchEngine

CATCH_UP_WAIT_S = 10.0
"""How long a search waits for the full-text index to catch up with the SQL index (`catch_up`) before it answers
from the generation it has open, or, when it has none yet (a process's first opening, which may build the host's
index: ~40-60 s at 100,000 pages), before it is refused with `SearchNotReady` (503, Retry-After)."""


class Searcher:
    """Search over one database (`db`, for a connection of its own when the caller has none) and its full-text index."""

    def __init__(self, db: Engine, engine: SearchEngine) -> None:
        self.db = db
        self.engine = engine

    def catch_up(self) -> Future[None] | None:
        """When due (`engine.due`): the one sync in flight, on a connection and in a thread of its own; else None."""
        return self.engine.sync_in_background(self.db.connect) if self.engine.due() else None

    def caught_up(self) -> None:
        """Wait (blocking) at most CATCH_UP_WAIT_S for a due catch-up; SearchNotReady while no generation is open."""
        flight = self.catch_up()
        if flight is not None:
            try:
                flight.result(CATCH_UP_WAIT_S)
            except FutureTimeout:
                pass
        self.ready()

    def ready(self) -> None:
        """SearchNotReady while this process has no generation of the full-text index open."""
        if self.engine.generation is None:
            raise SearchNotReady(
                "the full-text index is being built or opened (the first search after a start on this index); "
                "search answers once it is ready (GET /api/health); pages and the other views answer meanwhile"
            )

    def filter_problems(self, filters: Filters, conn: Connection | None = None, sync: bool = True) -> list[FilterProblem]:
        """Filter values no page can have (type, arch, confidence, the facets), each with the values allowed.

        `sync=False`: read the values of the generation open now (the caller caught up: `caught_up`)."""
        from snippets.architectures import FAMILIES, KNOWN_ARCHITECTURES, normalize_architecture
        from snippets.page import KNOWN_TYPES

        facets = {name: getattr(filters, name) for name in FILTER_FACETS if getattr(filters, name)}
        if not (filters.type or filters.arch or filters.confidence or facets):
            return []
        if sync:
            with connected(self.db, conn) as conn:
                self.engine.sync(conn)
        values = self.engine.values
        problems = []
        if filters.type and filters.type not in KNOWN_TYPES | set(values["type"]):
            problems.append(FilterProblem("type", filters.type, sorted(KNOWN_TYPES | set(values["type"]))))
        if filters.arch and normalize_architecture(filters.arch) not in (*KNOWN_ARCHITECTURES, *FAMILIES):
            problems.append(FilterProblem("arch", filters.arch, [*KNOWN_ARCHITECTURES, *FAMILIES]))
        if filters.confidence and filters.confidence not in values["confidence"]:
            problems.append(FilterProblem("confidence", filters.confidence, values["confidence"]))
        for name, value in facets.items():  # values as the index holds them: lowercase
            if value.lower() not in values[name]:
                problems.append(FilterProblem(name, value, values[name]))
        return problems

    def search(
        self,
        query: str,
        filters: Filters,
        limit: int = 20,
        offset: int = 0,
        max_chars: int = 2000,
        conn: Connection | None = None,
        facets: tuple[str, ...] = (),
        sync: bool = True,
    ) -> SearchPublic:
        """Ranked, filtered search, counted by the `facets` asked for; any input gives results or none.

        `conn` serves one small query: the index generation, so this process's
        full-text index follows reindexes made by other processes too (asked at
        most every `refresh_s` of the engine). `sync=False`: never asked here
        (the caller checked `engine.due()` and holds no connection).
        """
        if sync and self.engine.due():
            with connected(self.db, conn) as conn:
                self.engine.sync(conn)
        terms = {k: v.lower() if k in ("tag", "language", *FILTER_FACETS) else v for k, v in filters.as_params().items()}
        if filters.arch:
            terms["arch"] = normalize_arch(filters.arch)
        return self.engine.search(query[:max_chars], terms, filters.as_params(), limit=limit, offset=offset, facets=facets)
