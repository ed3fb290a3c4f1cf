"""Turning the services' data (app/pages.py, app/evidence) into what templates show: page context, home groups, dashboard rows.

Kept apart from the routes so the benchmark and tests can call them directly.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.engine import Connection

from app.evidence import status as evidence_status
from app.evidence.store import NO_TARGET, EvidenceStore
from app.index.db import connected, index_generation
from app.index.filters import Filters
from app.index.run_gpus import ran_on_statement
from app.pages import Pages
from app.schemas import PageList, PagePublic, PageSummary, SearchPublic, SearchResult, SnippetPublic
from app.web import queries
from app.web.badges import STATUS_ORDER, SnippetEvidence, TargetEvidence, snippet_evidence, target_evidence
from app.web.filters import safe_url
from app.web.graph import GRAPH_NODES, layout
from app.web.render import Segment, body_link_candidates, render_body, toc_items
from app.web.state import WebState
from snippets.architectures import target_sort_key
from snippets.page import KNOWN_FIELDS
from snippets.snippet import NEVER_BUILT_MODES

HOME_PAGE_SIZE = 100  # page cards per home page window
DASHBOARD_PAGE_SIZE = 50  # snippet × target rows per evidence dashboard window (each reads its snippet's evidence)


SHOWN_APART = frozenset({"performance_claims", "reproducibility"})
"""Front-matter fields the page shows in their own place (the claims table, the reproducibility chip)."""


def vendor_of(page: PageSummary) -> str:
    """The vendor a page belongs to: the wiki folder it sits in (`nvidia/…` → nvidia), else 'general'."""
    head, sep, _ = page.path.partition("/")
    return head if sep else "general"


@dataclass
class PageView:
    """Everything the page template needs."""

    page: PagePublic
    segments: list[Segment]
    evidence: dict[str, SnippetEvidence]
    toc: list[dict[str, Any]]
    extra: dict[str, Any]  # front-matter fields the panel has no special place for
    url: str | None  # a source page's own link
    counts: dict[str, int]  # snippet statuses on this page


def page_view(pages: Pages, web: WebState, page_id: str, conn: Connection) -> PageView | None:
    """Fetch a page and render its body with evidence slots (body cached per content)."""
    page = pages.get_page(page_id, conn=conn)
    if page is None:
        return None
    source = queries.page_source(conn, page_id)
    errors = queries.snippet_errors(conn, page_id) if any(s.mode == "error" for s in page.snippets) else {}
    if source is None:
        return None
    # What the body's links name, then which of those are pages (per index generation): never every page's id and path.
    named = web.link_names.get_or_make((page_id, source.content_hash), lambda: body_link_candidates(source.body, source.path))
    links = web.links.get_or_make((index_generation(conn), page_id, source.content_hash), lambda: queries.link_map(conn, *named))
    snippet_key = tuple((s.id, s.line, s.content_hash) for s in page.snippets)
    segments = web.bodies.get_or_make(
        (page_id, source.content_hash, links.key, snippet_key),
        lambda: render_body(source.body, source.body_line, source.path, page.snippets, links.ids, links.paths, web.code),
    )
    evidence = {s.id: snippet_evidence(s, errors.get(s.id)) for s in page.snippets}
    counts = Counter(s.status for s in page.snippets)
    extra = {k: v for k, v in page.meta.items() if k not in KNOWN_FIELDS and k not in SHOWN_APART and v not in (None, "", [], {})}
    url = safe_url(extra.pop("url", None))
    return PageView(page, segments, evidence, toc_items(page.toc), extra, url, dict(counts))


@dataclass(frozen=True)
class Summary:
    """Snippet status counts, the newest run and what ran where, for one data version."""

    status_counts: Counter[str]
    snippet_total: int
    evidence_total: int
    latest: dict[str, Any] | None
    ran_on: str  # which GPUs ran programs that passed, per family, in words (app/index/run_gpus.py)


def summary(evidence: EvidenceStore, conn: Connection) -> Summary:
    """From the statuses stored with the snippets (app/evidence/status.py): counted in SQL, nothing rebuilt; what ran
    where from the few rows of `run_gpu`, kept as evidence is stored (never a scan of the evidence)."""
    counts = evidence_status.status_counts(conn)
    ran = ran_on_statement(evidence.ran_on(conn))
    return Summary(counts, sum(counts.values()), evidence.count(conn), queries.latest_run(conn), ran)


@dataclass
class HomeView:
    groups: list[tuple[str, list[tuple[str, list[PageSummary]]]]]  # type → [(vendor, pages)], this window's pages
    total: int  # pages the filters select
    offset: int
    limit: int
    arch_facets: dict[str, int]
    type_facets: dict[str, int]
    page_status: dict[str, Counter[str]]  # page id → snippet status counts (this window's pages)
    status_counts: Counter[str]
    snippet_total: int
    evidence_total: int
    latest: dict[str, Any] | None
    ran_on: str  # what ran where, in words (Summary.ran_on)

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def prev_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


def home_view(
    pages: Pages,
    web: WebState,
    arch: str | None,
    type_: str | None,
    tag: str | None = None,
    offset: int = 0,
    conn: Connection | None = None,
    limit: int = HOME_PAGE_SIZE,
) -> HomeView:
    """One window of the pages the filters select, with facets and the verification summary, all from SQL."""
    with pages.connection(conn) as conn:
        facets = pages.page_facets(conn, Filters())
        listing = pages.list_pages(Filters(arch=arch, type=type_, tag=tag), limit=limit, offset=offset, conn=conn, facets=False)
        grouped: dict[str, dict[str, list[PageSummary]]] = defaultdict(lambda: defaultdict(list))
        for p in listing.pages:
            grouped[p.type][vendor_of(p)].append(p)
        groups = [(t, sorted(v.items())) for t, v in sorted(grouped.items(), key=lambda kv: (kv[0] == "source", kv[0]))]
        per_page = evidence_status.page_status_counts(conn, [p.id for p in listing.pages])
        total = summary(pages.evidence, conn)
    return HomeView(
        groups=groups,
        total=listing.total,
        offset=offset,
        limit=limit,
        arch_facets=dict(sorted(facets.get("arch", {}).items(), key=_arch_order)),
        type_facets=facets.get("type", {}),
        page_status=per_page,
        status_counts=total.status_counts,
        snippet_total=total.snippet_total,
        evidence_total=total.evidence_total,
        latest=total.latest,
        ran_on=total.ran_on,
    )


def _arch_order(item: tuple[str, int]) -> tuple[int, str]:
    return target_sort_key(item[0])


def listing_as_results(listing: PageList, filters: Filters, offset: int) -> SearchPublic:
    """A filtered page list (the window at `offset`) in the shape of search results (for `/search?tag=…` without
    words); `next` pages by offset, as the search page does."""
    following = offset + listing.limit
    results = [
        SearchResult(
            id=p.id,
            title=p.title,
            type=p.type,
            path=p.path,
            architectures=p.architectures,
            score=0.0,
            section=None,
            snippet=html.escape(", ".join(p.tags)),
        )
        for p in listing.pages
    ]
    return SearchPublic(
        query="",
        total=listing.total,
        limit=listing.limit,
        offset=offset,
        next=urlencode({**filters.as_params(), "limit": listing.limit, "offset": following})
        if following < listing.total
        else None,
        results=results,
        facets=listing.facets,
        took_ms=0.0,
    )


@dataclass
class DashboardRow:
    """One snippet × target line of the evidence dashboard."""

    snippet: SnippetPublic
    page_title: str
    target: TargetEvidence


@dataclass
class DashboardView:
    rows: list[DashboardRow]  # this window's rows
    total: int  # rows after every filter
    statuses: dict[str, int]  # status → rows, before the status filter
    targets: list[str]
    pages: list[tuple[str, str]]  # (id, title) of pages with snippets (at most 1000)
    latest: dict[str, Any] | None
    offset: int = 0
    limit: int = DASHBOARD_PAGE_SIZE

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def prev_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


def dashboard_rows(s: SnippetPublic, page_title: str) -> list[DashboardRow]:
    """One row per target of a snippet; a single row for a sketch or an invalid block."""
    if s.mode in NEVER_BUILT_MODES:
        return [sketch_or_invalid_row(s, page_title)]
    targets = list(s.targets) + [t for t in s.evidence if t not in s.targets]
    return [DashboardRow(s, page_title, target_evidence(t, s.evidence.get(t, []), s.target_status.get(t))) for t in targets]


def sketch_or_invalid_row(s: SnippetPublic, page_title: str) -> DashboardRow:
    note = snippet_evidence(s, "invalid attributes").note
    assert note is not None
    return DashboardRow(s, page_title, TargetEvidence("—", note.status, [note]))


def dashboard_view(
    evidence: EvidenceStore,
    status: str | None,
    target: str | None,
    page: str | None,
    offset: int = 0,
    conn: Connection | None = None,
    limit: int = DASHBOARD_PAGE_SIZE,
) -> DashboardView:
    """One window of the snippet × target rows, failures first, filtered, counted and paged in SQL over the
    stored lines (app/evidence/status.py); only the window's snippets are read with their evidence."""
    with connected(evidence.engine, conn) as conn:
        found = evidence_status.line_window(conn, status, target, page, limit, offset)
        targets = sorted(evidence_status.line_targets(conn), key=target_sort_key)
        pages = evidence_status.line_pages(conn)
        ids = sorted({sid for sid, _, _ in found.lines})
        snippets = {s.id: s for s in evidence.snippets_with_evidence(conn, ids=ids)} if ids else {}
        window_titles = queries.page_titles(conn, sorted({s.page_id for s in snippets.values()}))
        latest = queries.latest_run(conn)
    rows = []
    for snippet_id, line_target, _ in found.lines:
        s = snippets.get(snippet_id)
        if s is None:
            continue
        title = window_titles.get(s.page_id, s.page_id)
        rows.append(
            sketch_or_invalid_row(s, title)
            if line_target == NO_TARGET
            else DashboardRow(
                s, title, target_evidence(line_target, s.evidence.get(line_target, []), s.target_status.get(line_target))
            )
        )
    ordered = {st: found.statuses[st] for st in STATUS_ORDER if found.statuses.get(st)}
    return DashboardView(rows, found.total, ordered, [t for t in targets if t != NO_TARGET], pages, latest, offset, limit)


def graph_drawing(web: WebState, pages: Pages, conn: Connection, page_id: str | None) -> tuple[str, dict[str, object]]:
    """The graph view's SVG and counts: the most-linked pages (`page_id` None) or a page's neighbourhood, drawn
    once per index generation (a layout is kept per graph content: app/web/graph.py). Requests that arrive while
    it is drawn wait for that one drawing; the start-up warm-up (app/web/warm.py) draws the whole wiki's."""

    def draw() -> tuple[str, dict[str, object]]:
        data = pages.graph(page=page_id, depth=1, limit=GRAPH_NODES, conn=conn)
        drawn = layout(data)
        counts = {
            "nodes": len(drawn.nodes),
            "edges": len(drawn.edges),
            "types": drawn.types,
            "total_nodes": data["total_nodes"],
            "total_edges": data["total_edges"],
        }
        return web.env.get_template("_graph.html").render(layout=drawn, center=page_id), counts

    drawing: tuple[str, dict[str, object]] = web.graphs.get_or_make((index_generation(conn), page_id), draw)
    return drawing
