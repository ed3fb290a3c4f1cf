"""The index's one reading interface: search, pages, snippets, evidence, graph.

Every function the API and the HTML views need is a method here, returning
the `*Public` models of app/schemas.py, so both views are fed by the same data
functions. Backend-specific SQL is confined to the search backend.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from app.cache import LRU
from app.evidence.claims import claim_problems, facts_from_public
from app.evidence.measured_claims import with_measurements
from app.evidence.store import EvidenceStore, page_evidence_text
from app.index.build import IndexReport, reindex
from app.index.db import create_schema, index_generation, make_engine
from app.index.facets import FILTER_FACETS
from app.index.filters import FilterProblem, Filters, normalize_arch
from app.index.graph import GRAPH_LIMIT, graph
from app.index.listing import list_pages, page_facets
from app.index.models import (
    AliasRow,
    DiagnosticRow,
    FileRow,
    LinkRow,
    PageRow,
    SectionRow,
    SnippetRow,
    table_of,
)
from app.index.perf import claims_of_page
from app.schemas import (
    LinkPublic,
    PageList,
    PagePublic,
    SearchPublic,
    SectionPublic,
)
from app.search import SearchEngine, search_dir_for
from snippets.snippet import NEVER_BUILT_MODES

LISTING_CACHE_SIZE = 256
T = TypeVar("T")


class Store:
    """SQL index access for one database URL."""

    def __init__(
        self,
        url: str,
        pool_size: int | None = None,
        max_overflow: int | None = None,
        pool_timeout: float | None = None,
        search_engine: SearchEngine | None = None,
    ) -> None:
        self.url = url
        self.engine: Engine = make_engine(url, pool_size=pool_size, max_overflow=max_overflow, pool_timeout=pool_timeout)
        self.evidence = EvidenceStore(self.engine)
        self._listing_cache: LRU[Any] = LRU(LISTING_CACHE_SIZE)  # facets and graph answers, keyed by index generation
        self.search_engine = search_engine or SearchEngine(directory=search_dir_for(url))

    @contextmanager
    def connection(self, conn: Connection | None = None) -> Iterator[Connection]:
        """`conn` itself when given (a request's connection), else a connection of its own (CLI, tests).

        Request paths always pass their one connection down, so no request ever holds two.
        """
        if conn is not None:
            yield conn
            return
        with self.engine.connect() as own:
            yield own

    # -- writing -------------------------------------------------------------

    def create_schema(self) -> None:
        create_schema(self.engine)
        self.evidence.judge_missing()  # statuses of an index from before migration 0009, once

    def reindex(self, root: Path, force: bool = False, full_text: bool = True) -> IndexReport:
        """Reindex the wiki into SQL, then bring this process's full-text index in line (changed pages only).

        `full_text=False` for a process that will not search (the CLI's `index`): the first serving
        process builds the host's full-text index from the SQL rows (app/search/sync.py).
        """
        if not full_text:
            return reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses)
        with self.search_engine.writing():  # searches meanwhile ask for the generation, so none answers stale after the commit
            report = reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses)
            with self.engine.connect() as conn:
                self.search_engine.sync(conn)
        return report

    # -- filters ---------------------------------------------------------------

    def filter_problems(self, filters: Filters, conn: Connection | None = None) -> list[FilterProblem]:
        """Filter values no page can have (type, arch, confidence, the facets), each with the values allowed."""
        from snippets.architectures import KNOWN_ARCHITECTURES, normalize_architecture
        from snippets.page import KNOWN_TYPES

        facets = {name: getattr(filters, name) for name in FILTER_FACETS if getattr(filters, name)}
        if not (filters.type or filters.arch or filters.confidence or facets):
            return []
        with self.connection(conn) as conn:
            self.search_engine.sync(conn)
        values = self.search_engine.values
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

    # -- search ----------------------------------------------------------------

    def resolve(self, name: str, conn: Connection | None = None) -> str | None:
        """Alias, title or id (case-insensitive) → page id."""
        needle = name.strip().lower()
        if not needle:
            return None
        with self.connection(conn) as conn:
            for stmt in (
                select(col(PageRow.id)).where(col(PageRow.id) == needle),  # ids are lowercase by rule
                select(col(AliasRow.page_id)).where(col(AliasRow.alias_lower) == needle).order_by(col(AliasRow.page_id)),
                select(col(PageRow.id)).where(col(PageRow.title_lower) == needle).order_by(col(PageRow.id)),
            ):
                found = conn.execute(stmt.limit(1)).scalar()
                if found:
                    return found
        return None

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
        """Ranked, filtered search (app.search), counted by the `facets` asked for; any input gives results or none.

        `conn` serves one small query: the index generation, so this process's
        full-text index follows reindexes made by other processes too (asked at
        most every `refresh_s` of the engine). `sync=False`: never asked here
        (the caller checked `search_engine.due()` and holds no connection).
        """
        if sync and self.search_engine.due():
            with self.connection(conn) as conn:
                self.search_engine.sync(conn)
        terms = {k: v.lower() if k in ("tag", "language", *FILTER_FACETS) else v for k, v in filters.as_params().items()}
        if filters.arch:
            terms["arch"] = normalize_arch(filters.arch)
        return self.search_engine.search(query[:max_chars], terms, filters.as_params(), limit=limit, offset=offset, facets=facets)

    # -- pages -----------------------------------------------------------------

    def list_pages(
        self, filters: Filters, limit: int = 50, offset: int = 0, conn: Connection | None = None, facets: bool = True
    ) -> PageList:
        """One window of the filtered pages, ordered by type and title: paged, counted and faceted in SQL (app/index/listing.py)."""
        with self.connection(conn) as conn:
            return list_pages(conn, filters, limit, offset, (lambda: self.page_facets(conn, filters)) if facets else None)

    def page_facets(self, conn: Connection, filters: Filters) -> dict[str, dict[str, int]]:
        """Type, architecture family and top-30 tag counts of the filtered pages (GROUP BY in SQL),
        kept per index generation: they change only when the wiki does."""
        return self._per_generation(conn, ("facets", filters), lambda: page_facets(conn, filters))

    def _per_generation(self, conn: Connection, key: Any, make: Callable[[], T]) -> T:
        """`make()` once per index generation and key (a small LRU; the answers are small)."""
        return self._listing_cache.get_or_make((index_generation(conn), key), make)

    def page_by_path(self, path: str, conn: Connection | None = None) -> str | None:
        with self.connection(conn) as conn:
            return conn.execute(select(col(PageRow.id)).where(col(PageRow.path) == path)).scalar()

    def page_sources(self, page_ids: list[str], conn: Connection | None = None) -> dict[str, tuple[str, int]]:
        """Each existing page's Markdown body and the file line it starts on (for the Markdown views of app/agents)."""
        if conn is None:
            with self.engine.connect() as own:
                return self.page_sources(page_ids, own)
        found: dict[str, tuple[str, int]] = {}
        for i in range(0, len(page_ids), 500):
            stmt = select(col(PageRow.id), col(PageRow.body), col(PageRow.body_line)).where(
                col(PageRow.id).in_(page_ids[i : i + 500])
            )
            found.update({r.id: (r.body, r.body_line) for r in conn.execute(stmt)})
        return found

    def get_page(self, page_id: str, conn: Connection | None = None) -> PagePublic | None:
        """Everything about a page: front matter, HTML, sections, links, backlinks, snippets with evidence."""
        with self.connection(conn) as conn:
            page = conn.execute(table_of(PageRow).select().where(col(PageRow.id) == page_id)).first()
            if page is None:
                return None
            meta = json.loads(page.meta)
            sections = [
                SectionPublic(level=s.level, heading=s.heading, anchor=s.anchor, line=s.line)
                for s in conn.execute(
                    table_of(SectionRow).select().where(col(SectionRow.page_id) == page_id).order_by(col(SectionRow.position))
                )
                if s.anchor
            ]
            links = conn.execute(
                table_of(LinkRow).select().where(col(LinkRow.source_id) == page_id).order_by(col(LinkRow.id))
            ).all()
            back = conn.execute(select(col(LinkRow.source_id), col(LinkRow.kind)).where(col(LinkRow.target_id) == page_id)).all()
            wanted = {ln.target_id for ln in links} | {b.source_id for b in back}
            info = {
                r.id: r
                for r in conn.execute(
                    select(col(PageRow.id), col(PageRow.title), col(PageRow.type), col(PageRow.meta)).where(
                        col(PageRow.id).in_(wanted)
                    )
                )
            }

            def link(pid: str, resolved: bool) -> LinkPublic:
                r = info.get(pid)
                url = json.loads(r.meta).get("url") if r is not None else None
                return LinkPublic(
                    id=pid,
                    title=r.title if r else None,
                    type=r.type if r else None,
                    resolved=resolved and r is not None,
                    url=url if isinstance(url, str) else None,
                )

            related = [link(ln.target_id, ln.resolved) for ln in links if ln.kind == "related"]
            sources = [link(ln.target_id, ln.resolved) for ln in links if ln.kind == "sources"]
            seen: set[str] = set()
            backlinks = []
            for b in sorted(back, key=lambda b: b.source_id):
                if b.source_id not in seen and b.source_id != page_id:
                    seen.add(b.source_id)
                    backlinks.append(link(b.source_id, True))
            snippets = self.evidence.snippets_with_evidence(conn, page_id=page_id)
            performance_claims = claims_of_page(
                conn, page_id, with_measurements
            )  # app/index/perf.py, app/evidence/measured_claims.py
            problems = [
                {"line": d.line, "severity": d.severity, "message": d.message}
                for d in conn.execute(
                    select(col(DiagnosticRow.line), col(DiagnosticRow.severity), col(DiagnosticRow.message))
                    .where(col(DiagnosticRow.path) == page.path)
                    .order_by(col(DiagnosticRow.line), col(DiagnosticRow.id))
                )
            ]
        summary: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for snip in snippets:
            if snip.mode in NEVER_BUILT_MODES:
                summary["*"][snip.status] += 1
            for target, status in snip.target_status.items():
                summary[target][status] += 1
        return PagePublic(
            id=page.id,
            title=page.title,
            type=page.type,
            path=page.path,
            meta=meta,
            html=page.html,
            toc=json.loads(page.toc),
            sections=sections,
            related=related,
            sources=sources,
            backlinks=backlinks,
            snippets=snippets,
            evidence_summary={t: dict(c) for t, c in summary.items()},
            evidence_text=page_evidence_text(snippets),
            performance_claims=performance_claims,
            problems=problems,
            claim_problems=[
                f"{key}: {why}"
                for key, why in claim_problems(meta.get("confidence"), meta.get("evidence_level"), facts_from_public(snippets))
            ],
        )

    def graph(
        self, page: str | None = None, depth: int = 1, limit: int = GRAPH_LIMIT, conn: Connection | None = None
    ) -> dict[str, Any]:
        """A bounded piece of the link graph, never the whole of a large wiki.

        With `page`: that page and the pages within `depth` links of it (either direction); without:
        the `limit` pages with the most links. Edges are the resolved links among the chosen nodes.
        `total_nodes`/`total_edges` count the whole graph. Answers are kept per index generation.
        """
        with self.connection(conn) as conn:
            return self._per_generation(conn, ("graph", page, depth, limit), lambda: graph(conn, page, depth, limit))

    def health(self, conn: Connection | None = None) -> dict[str, Any]:
        with self.connection(conn) as conn:
            counts = {
                "pages": conn.execute(select(func.count(col(PageRow.id)))).scalar(),
                "files": conn.execute(select(func.count(col(FileRow.path)))).scalar(),
                "files_with_errors": conn.execute(
                    select(func.count(col(FileRow.path))).where(col(FileRow.page_id).is_(None))
                ).scalar(),
                "snippets": conn.execute(select(func.count(col(SnippetRow.id)))).scalar(),
                "evidence_records": self.evidence.count(conn),
            }
            diags = [
                f"{d.path}:{d.line}: {d.severity}: {d.message}"
                for d in conn.execute(
                    table_of(DiagnosticRow)
                    .select()
                    .where(col(DiagnosticRow.severity) == "error")
                    .order_by(col(DiagnosticRow.path), col(DiagnosticRow.line))
                    .limit(50)
                )
            ]
        return {"status": "ok", "database": self.engine.dialect.name, **counts, "errors": diags}
