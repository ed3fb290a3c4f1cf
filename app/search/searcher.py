"""`Searcher`: the search concern's service: ranked, filtered search, and the filter values no page can have.

Both ask this process's full-text index (app/search/engine.py), which follows the SQL index's generation:
given a connection, they bring it up to date first (at most every `refresh_s` of the engine).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine

from app.index.db import connected
from app.index.facets import FILTER_FACETS
from app.index.filters import FilterProblem, Filters, normalize_arch
from app.schemas import SearchPublic
from app.search.engine import SearchEngine


class Searcher:
    """Search over one database (`db`, for a connection of its own when the caller has none) and its full-text index."""

    def __init__(self, db: Engine, engine: SearchEngine) -> None:
        self.db = db
        self.engine = engine

    def filter_problems(self, filters: Filters, conn: Connection | None = None) -> list[FilterProblem]:
        """Filter values no page can have (type, arch, confidence, the facets), each with the values allowed."""
        from snippets.architectures import KNOWN_ARCHITECTURES, normalize_architecture
        from snippets.page import KNOWN_TYPES

        facets = {name: getattr(filters, name) for name in FILTER_FACETS if getattr(filters, name)}
        if not (filters.type or filters.arch or filters.confidence or facets):
            return []
        with connected(self.db, conn) as conn:
            self.engine.sync(conn)
        values = self.engine.values
        problems = []
        if filters.type and filters.type not in KNOWN_TYPES | set(values["type"]):
            problems.append(FilterProblem("type", filters.type, sorted(KNOWN_TYPES | set(values["type"]))))
        if filters.arch and normalize_architecture(filters.arch) not in KNOWN_ARCHITECTURES:
            problems.append(FilterProblem("arch", filters.arch, list(KNOWN_ARCHITECTURES)))
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
