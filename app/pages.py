"""`Pages`: the pages concern's service: one page with everything about it, listings, names, the link graph.

A page is the index's rows (app/index) joined with its snippets' evidence (app/evidence): `page_view`
assembles it. Listing facets and graph answers are kept per index generation (app/index/per_generation.py).
The REST API, the HTML views and the agents' Markdown and MCP tools all read pages here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from app.evidence.claims import claim_problems, facts_from_public
from app.evidence.measured_claims import with_measurements
from app.evidence.store import EvidenceStore, page_evidence_text
from app.index import lookup
from app.index.db import connected
from app.index.filters import Filters
from app.index.graph import GRAPH_LIMIT, graph
from app.index.listing import list_pages, page_facets
from app.index.markdown import render
from app.index.models import DiagnosticRow, LinkRow, PageRow, SectionRow, table_of
from app.index.per_generation import PerGeneration
from app.index.perf import claims_of_page
from app.schemas import LinkPublic, PageList, PagePublic, SectionPublic
from snippets.snippet import NEVER_BUILT_MODES

LISTING_CACHE_SIZE = 256


class Pages:
    """Reading pages from one database (`engine`, for a connection of its own when the caller has none)."""

    def __init__(
        self,
        engine: Engine,
        evidence: EvidenceStore,
        cache_size: int = LISTING_CACHE_SIZE,
        files: lookup.RepositoryFiles | None = None,
    ) -> None:
        self.engine = engine
        self.evidence = evidence
        self.files = files or lookup.RepositoryFiles()  # how the wiki's repository names a page's file (`page.file`)
        self.per_generation = PerGeneration(cache_size)  # facets and graph answers

    @contextmanager
    def connection(self, conn: Connection | None = None) -> Iterator[Connection]:
        """`conn` itself when given (a request's connection), else one of this service's own (CLI, MCP, tests)."""
        with connected(self.engine, conn) as conn:
            yield conn

    def get_page(self, page_id: str, conn: Connection | None = None, html: bool = False) -> PagePublic | None:
        """Everything about a page: front matter, sections, links, backlinks, snippets with evidence, and with
        `html` its body rendered (the page API; the web view renders with its own hooks)."""
        with self.connection(conn) as conn:
            return page_view(conn, page_id, self.evidence, self.files, html)

    def list_pages(
        self,
        filters: Filters,
        limit: int = 50,
        offset: int = 0,
        conn: Connection | None = None,
        facets: bool = True,
        after: tuple[str, str, str] | None = None,
    ) -> PageList:
        """One window of the filtered pages, ordered by type and title: paged (at `offset`, or after the sort key
        `after`), counted and faceted in SQL (app/index/listing.py)."""
        with self.connection(conn) as conn:
            counts = (lambda: self.page_facets(conn, filters)) if facets else None
            return list_pages(conn, filters, limit, offset, counts, after)

    def page_facets(self, conn: Connection, filters: Filters) -> dict[str, dict[str, int]]:
        """Type, architecture family and top-30 tag counts of the filtered pages (GROUP BY in SQL),
        kept per index generation: they change only when the wiki does."""
        return self.per_generation.get(conn, ("facets", filters), lambda: page_facets(conn, filters))

    def graph(
        self, page: str | None = None, depth: int = 1, limit: int = GRAPH_LIMIT, conn: Connection | None = None
    ) -> dict[str, Any]:
        """A bounded piece of the link graph, never the whole of a large wiki.

        With `page`: that page and the pages within `depth` links of it (either direction); without:
        the `limit` pages with the most links. Edges are the resolved links among the chosen nodes.
        `total_nodes`/`total_edges` count the whole graph. Answers are kept per index generation.
        """
        with self.connection(conn) as conn:
            return self.per_generation.get(conn, ("graph", page, depth, limit), lambda: graph(conn, page, depth, limit))

    def resolve(self, name: str, conn: Connection | None = None) -> str | None:
        """Alias, title or id (case-insensitive) → page id."""
        with self.connection(conn) as conn:
            return lookup.resolve(conn, name)

    def page_by_path(self, path: str, conn: Connection | None = None) -> str | None:
        """The id of the page whose file is `path` relative to the wiki root, if any."""
        with self.connection(conn) as conn:
            return lookup.page_by_path(conn, path)

    def page_under_wiki(self, path: str, conn: Connection | None = None) -> str | None:
        """The id of the page whose file is `path` under the wiki pages folder (`/wiki/{path}`), if any."""
        return self.page_by_path(self.files.under_wiki(path), conn=conn)

    def page_sources(self, page_ids: list[str], conn: Connection | None = None) -> dict[str, tuple[str, int]]:
        """Each existing page's Markdown body and the file line it starts on (for the Markdown views of app/agents)."""
        with self.connection(conn) as conn:
            return lookup.page_sources(conn, page_ids)


def page_view(
    conn: Connection, page_id: str, evidence: EvidenceStore, files: lookup.RepositoryFiles, html: bool = False
) -> PagePublic | None:
    """Everything about a page, or None: its rows, links both ways, diagnostics, and its snippets' evidence and claims;
    with `html`, its body rendered to safe HTML (done on request: the index stores no HTML). `files` names the page's
    file in its repository (`file`)."""
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
    links = conn.execute(table_of(LinkRow).select().where(col(LinkRow.source_id) == page_id).order_by(col(LinkRow.id))).all()
    back = conn.execute(select(col(LinkRow.source_id), col(LinkRow.kind)).where(col(LinkRow.target_id) == page_id)).all()
    wanted = {ln.target_id for ln in links} | {b.source_id for b in back}
    info = {
        r.id: r
        for r in conn.execute(
            select(col(PageRow.id), col(PageRow.title), col(PageRow.type), col(PageRow.meta)).where(col(PageRow.id).in_(wanted))
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
    snippets = evidence.snippets_with_evidence(conn, page_id=page_id)
    performance_claims = claims_of_page(conn, page_id, with_measurements)  # app/index/perf.py, app/evidence/measured_claims.py
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
        file=files.file(page.path),
        meta=meta,
        html=render(page.body).html if html else "",
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
