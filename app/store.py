"""The index's one reading interface: search, pages, snippets, evidence, graph.

Every function the API and the HTML views need is a method here, returning
the `*Public` models of app/schemas.py, so both views are fed by the same data
functions. Backend-specific SQL is confined to the search backend.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from app.evidence.claims import claim_problems, facts_from_public
from app.evidence.measured_claims import with_measurements
from app.evidence.store import EvidenceStore, page_evidence_text
from app.index.build import IndexReport, reindex
from app.index.db import chunks, create_schema, index_generation, make_engine
from app.index.facets import FILTER_FACETS
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
    PageSummary,
    SearchPublic,
    SectionPublic,
)
from app.search import SearchEngine
from snippets.architectures import family
from snippets.snippet import NEVER_BUILT_MODES


@dataclass(frozen=True)
class Filters:
    """Filters shared by search and page listing; None means 'any'."""

    type: str | None = None
    arch: str | None = None  # any spelling; matched by family (sm90a ≡ sm90)
    tag: str | None = None
    language: str | None = None
    confidence: str | None = None
    technique: str | None = None  # the facets of app.index.facets.FILTER_FACETS, case-insensitive
    hardware_feature: str | None = None
    kernel_type: str | None = None

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass(frozen=True)
class FilterProblem:
    """A filter value that matches no page, with the values that exist (an API answers 422 with it)."""

    parameter: str
    value: str
    allowed: list[str]

    @property
    def message(self) -> str:
        shown = ", ".join(self.allowed[:50]) + (", …" if len(self.allowed) > 50 else "")
        return f"{self.parameter}: there is no value '{self.value}'; allowed: {shown or '(none in this wiki)'}"


GRAPH_LIMIT = 150
LISTING_CACHE_SIZE = 256
T = TypeVar("T")
"""Nodes a graph answer holds by default: the most-linked pages, or a page's neighbourhood."""


def _normalize_arch(value: str) -> str:
    from snippets.architectures import normalize_architecture

    return family(normalize_architecture(value))


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
        self._listing_lock = threading.Lock()
        self._listing_cache: OrderedDict[Any, Any] = OrderedDict()  # facets and graph answers per generation
        self.search_engine = search_engine or SearchEngine()

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

        `full_text=False` for a process that will not search (the CLI's `index`): each serving
        process builds its own full-text index from the SQL rows, so building one here is waste.
        """
        if not full_text:
            return reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses)
        with self.search_engine.writing():  # searches meanwhile ask for the generation, so none answers stale after the commit
            report = reindex(self.engine, root, force=force, judge=self.evidence.refresh_statuses)
            with self.engine.connect() as conn:
                self.search_engine.sync(conn)
        return report

    # -- filters ---------------------------------------------------------------

    @staticmethod
    def _filter_sql(filters: Filters, column: str = "page_id") -> tuple[str, dict[str, str]]:
        parts: list[str] = []
        params: dict[str, str] = {}
        if filters.type:
            parts.append(f"{column} IN (SELECT id FROM page WHERE type = :f_type)")
            params["f_type"] = filters.type
        if filters.confidence:
            parts.append(f"{column} IN (SELECT id FROM page WHERE confidence = :f_conf)")
            params["f_conf"] = filters.confidence
        if filters.arch:
            parts.append(f"{column} IN (SELECT page_id FROM architecture WHERE family = :f_arch)")
            params["f_arch"] = _normalize_arch(filters.arch)
        if filters.tag:
            parts.append(f"{column} IN (SELECT page_id FROM tag WHERE lower(tag) = lower(:f_tag))")
            params["f_tag"] = filters.tag
        if filters.language:
            parts.append(f"{column} IN (SELECT page_id FROM language WHERE lower(language) = lower(:f_lang) OR language = '*')")
            params["f_lang"] = filters.language
        for name, field in FILTER_FACETS.items():
            value = getattr(filters, name)
            if value:
                parts.append(
                    f"{column} IN (SELECT page_id FROM facet WHERE facet = :f_{name}_field AND lower(value) = lower(:f_{name}))"
                )
                params[f"f_{name}_field"] = field
                params[f"f_{name}"] = value
        return "".join(" AND " + p for p in parts), params

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
            terms["arch"] = _normalize_arch(filters.arch)
        return self.search_engine.search(query[:max_chars], terms, filters.as_params(), limit=limit, offset=offset, facets=facets)

    # -- pages -----------------------------------------------------------------

    def list_pages(
        self, filters: Filters, limit: int = 50, offset: int = 0, conn: Connection | None = None, facets: bool = True
    ) -> PageList:
        """One window of the filtered pages, ordered by type and title: paged, counted and faceted in SQL."""
        filter_sql, params = self._filter_sql(filters, column="id")
        where = "WHERE 1=1" + filter_sql
        with self.connection(conn) as conn:
            total = conn.execute(text(f"SELECT count(*) FROM page {where}"), params).scalar() or 0
            # The window's ids first, walking ix_page_listing in order (on SQLite `+id` keeps the planner from
            # probing the primary key once per filtered page and sorting them all), then only the window's rows.
            walk = "WHERE 1=1" + self._filter_sql(filters, column="+id" if conn.dialect.name == "sqlite" else "id")[0]
            ids = [
                r[0]
                for r in conn.execute(
                    text(f"SELECT id FROM page {walk} ORDER BY type, title, id LIMIT :lim OFFSET :off"),
                    {**params, "lim": limit, "off": offset},
                )
            ]
            by_id = (
                {
                    r.id: r
                    for r in conn.execute(
                        select(
                            col(PageRow.id),
                            col(PageRow.title),
                            col(PageRow.type),
                            col(PageRow.path),
                            col(PageRow.meta),
                            col(PageRow.confidence),
                        ).where(col(PageRow.id).in_(ids))
                    )
                }
                if ids
                else {}
            )
            rows = [by_id[i] for i in ids if i in by_id]
            counts = self.page_facets(conn, filters) if facets else {}
        pages = []
        for r in rows:
            meta = json.loads(r.meta)
            pages.append(
                PageSummary(
                    id=r.id,
                    title=r.title,
                    type=r.type,
                    path=r.path,
                    architectures=meta.get("architectures", []),
                    tags=meta.get("tags", []),
                    confidence=r.confidence,
                )
            )
        next_q = urlencode({**filters.as_params(), "limit": limit, "offset": offset + limit}) if offset + limit < total else None
        return PageList(total=total, limit=limit, offset=offset, next=next_q, pages=pages, facets=counts)

    def page_facets(self, conn: Connection, filters: Filters) -> dict[str, dict[str, int]]:
        """Type, architecture family and top-30 tag counts of the filtered pages (GROUP BY in SQL),
        kept per index generation: they change only when the wiki does."""
        return self._per_generation(conn, ("facets", filters), lambda: self._page_facets(conn, filters))

    def _page_facets(self, conn: Connection, filters: Filters) -> dict[str, dict[str, int]]:
        filter_sql, params = self._filter_sql(filters, column="id")
        within = f" WHERE page_id IN (SELECT id FROM page WHERE 1=1{filter_sql})" if filter_sql else ""
        types = conn.execute(
            text(f"SELECT type, count(*) AS n FROM page WHERE 1=1{filter_sql} GROUP BY type ORDER BY n DESC, type"), params
        )
        archs = conn.execute(
            text(
                f"SELECT family, count(DISTINCT page_id) AS n FROM architecture{within} GROUP BY family ORDER BY n DESC, family"
            ),
            params,
        )
        tags = conn.execute(
            text(f"SELECT tag, count(*) AS n FROM tag{within} GROUP BY tag ORDER BY n DESC, tag LIMIT 30"), params
        )
        return {"type": dict(types.all()), "arch": dict(archs.all()), "tag": dict(tags.all())}

    def _per_generation(self, conn: Connection, key: Any, make: Callable[[], T]) -> T:
        """`make()` once per index generation and key (a small LRU; the answers are small)."""
        full = (index_generation(conn), key)
        with self._listing_lock:
            if full in self._listing_cache:
                self._listing_cache.move_to_end(full)
                return self._listing_cache[full]
        value = make()
        with self._listing_lock:
            self._listing_cache[full] = value
            while len(self._listing_cache) > LISTING_CACHE_SIZE:
                self._listing_cache.popitem(last=False)
        return value

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
            return self._per_generation(conn, ("graph", page, depth, limit), lambda: self._graph(conn, page, depth, limit))

    def _graph(self, conn: Connection, page: str | None, depth: int, limit: int) -> dict[str, Any]:
        total_nodes = conn.execute(select(func.count(col(PageRow.id)))).scalar() or 0
        total_edges = conn.execute(select(func.count(col(LinkRow.id))).where(col(LinkRow.resolved).is_(True))).scalar() or 0
        if page is not None:
            chosen = [page] if conn.execute(select(col(PageRow.id)).where(col(PageRow.id) == page)).scalar() else []
            frontier = set(chosen)
            for _ in range(depth if chosen else 0):
                if not frontier or len(chosen) >= limit:
                    break
                found: set[str] = set()
                for chunk in chunks(sorted(frontier), 500):
                    found |= {
                        r[0]
                        for r in conn.execute(
                            select(col(LinkRow.target_id)).where(
                                col(LinkRow.resolved).is_(True), col(LinkRow.source_id).in_(chunk)
                            )
                        )
                    }
                    found |= {
                        r[0]
                        for r in conn.execute(
                            select(col(LinkRow.source_id)).where(
                                col(LinkRow.resolved).is_(True), col(LinkRow.target_id).in_(chunk)
                            )
                        )
                    }
                frontier = found - set(chosen)
                chosen += sorted(frontier)[: limit - len(chosen)]
        else:
            chosen = []
        ends = (
            select(col(LinkRow.source_id).label("pid"))
            .where(col(LinkRow.resolved).is_(True))
            .union_all(select(col(LinkRow.target_id).label("pid")).where(col(LinkRow.resolved).is_(True)))
            .subquery()
        )
        degree = select(ends.c.pid, func.count().label("degree")).group_by(ends.c.pid).subquery()
        stmt = select(
            col(PageRow.id), col(PageRow.title), col(PageRow.type), func.coalesce(degree.c.degree, 0).label("degree")
        ).outerjoin(degree, degree.c.pid == PageRow.id)
        if page is not None:  # degrees of the chosen pages only, through the link indexes
            out_degree = (
                select(func.count())
                .where(col(LinkRow.resolved).is_(True), col(LinkRow.source_id) == col(PageRow.id))
                .scalar_subquery()
            )
            in_degree = (
                select(func.count())
                .where(col(LinkRow.resolved).is_(True), col(LinkRow.target_id) == col(PageRow.id))
                .scalar_subquery()
            )
            near = select(col(PageRow.id), col(PageRow.title), col(PageRow.type), (out_degree + in_degree).label("degree"))
            rows = (
                []
                if not chosen
                else [r for chunk in chunks(chosen, 500) for r in conn.execute(near.where(col(PageRow.id).in_(chunk)))]
            )
            order = {pid: i for i, pid in enumerate(chosen)}
            rows.sort(key=lambda r: order[r.id])
        else:
            rows = list(conn.execute(stmt.order_by(func.coalesce(degree.c.degree, 0).desc(), col(PageRow.id)).limit(limit)))
        ids = [r.id for r in rows]
        edges = []
        if ids:
            edges = [
                {"source": r.source_id, "target": r.target_id, "kind": r.kind}
                for r in conn.execute(
                    select(col(LinkRow.source_id), col(LinkRow.target_id), col(LinkRow.kind))
                    .where(col(LinkRow.resolved).is_(True), col(LinkRow.source_id).in_(ids), col(LinkRow.target_id).in_(ids))
                    .order_by(col(LinkRow.id))
                )
            ]
        nodes = [{"id": r.id, "title": r.title, "type": r.type, "degree": int(r.degree)} for r in rows]
        return {
            "nodes": nodes,
            "edges": edges,
            "page": page,
            "depth": depth if page is not None else None,
            "limit": limit,
            "total_nodes": total_nodes,
            "total_edges": total_edges,
        }

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
