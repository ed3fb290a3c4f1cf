"""Turning store data into what templates show: page context, home groups, dashboard rows.

Kept apart from the routes so the benchmark and tests can call them directly.
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from app.schemas import PageList, PagePublic, PageSummary, SearchPublic, SearchResult, SnippetPublic
from app.store import Filters, Store
from app.web import queries
from app.web.badges import STATUS_ORDER, SnippetEvidence, TargetEvidence, rank, snippet_evidence, target_evidence
from app.web.render import Segment, render_body, toc_items
from app.web.state import WebState

SAFE_URL = re.compile(r"^https?://[^\s\"'<>]+$", re.IGNORECASE)
KNOWN_META = {"id", "title", "type", "architectures", "languages", "tags", "aliases", "confidence",
              "evidence_level", "evidence_basis", "related", "sources"}  # fmt: skip


def safe_url(value: Any) -> str | None:
    """An author-given URL when it is plain http(s), else None (never a `javascript:` link)."""
    return value if isinstance(value, str) and SAFE_URL.match(value.strip()) else None


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


def page_view(store: Store, web: WebState, page_id: str) -> PageView | None:
    """Fetch a page and render its body with evidence slots (body cached per content)."""
    page = store.get_page(page_id)
    if page is None:
        return None
    with store.engine.connect() as conn:
        source = queries.page_source(conn, page_id)
        links = queries.link_map(conn)
        errors = queries.snippet_errors(conn, page_id) if any(s.mode == "error" for s in page.snippets) else {}
    if source is None:
        return None
    snippet_key = tuple((s.id, s.line, s.content_hash) for s in page.snippets)
    segments = web.bodies.get_or_make(
        (page_id, source.content_hash, links.key, snippet_key),
        lambda: render_body(source.body, source.body_line, source.path, page.snippets, set(links.ids), links.paths, web.code),
    )
    evidence = {s.id: snippet_evidence(s, errors.get(s.id)) for s in page.snippets}
    counts = Counter(s.status for s in page.snippets)
    extra = {k: v for k, v in page.meta.items() if k not in KNOWN_META and v not in (None, "", [], {})}
    url = safe_url(extra.pop("url", None))
    return PageView(page, segments, evidence, toc_items(page.toc), extra, url, dict(counts))


@dataclass(frozen=True)
class SnippetTable:
    """Every snippet with its evidence, the dashboard's rows, and the newest record: one data version."""

    snippets: list[SnippetPublic]
    rows: list["DashboardRow"]
    latest: dict[str, Any] | None
    evidence_total: int


def snippet_table(store: Store, web: WebState) -> SnippetTable:
    """All snippets and dashboard rows, rebuilt only when the index or the evidence changed."""
    with store.engine.connect() as conn:
        version = queries.data_version(conn)

        def build() -> SnippetTable:
            snippets = store.evidence.snippets_with_evidence(conn)
            titles = {p.id: p.title for p in store.list_pages(Filters(), limit=100_000).pages}
            rows = [row for s in snippets for row in dashboard_rows(s, titles.get(s.page_id, s.page_id))]
            return SnippetTable(snippets, rows, queries.latest_run(conn), version[1])

        return web.snippets.get_or_make(version, build)


@dataclass
class HomeView:
    groups: list[tuple[str, list[tuple[str, list[PageSummary]]]]]  # type → [(vendor, pages)]
    total: int
    arch_facets: dict[str, int]
    type_facets: dict[str, int]
    page_status: dict[str, Counter[str]]  # page id → snippet status counts
    status_counts: Counter[str]
    snippet_total: int
    evidence_total: int
    latest: dict[str, Any] | None


def home_view(store: Store, web: WebState, arch: str | None, type_: str | None, tag: str | None = None) -> HomeView:
    everything = store.list_pages(Filters(), limit=100_000)
    listing = store.list_pages(Filters(arch=arch, type=type_, tag=tag), limit=100_000) if (arch or type_ or tag) else everything
    grouped: dict[str, dict[str, list[PageSummary]]] = defaultdict(lambda: defaultdict(list))
    for p in listing.pages:
        grouped[p.type][vendor_of(p)].append(p)
    groups = [(t, sorted(v.items())) for t, v in sorted(grouped.items(), key=lambda kv: (kv[0] == "source", kv[0]))]
    table = snippet_table(store, web)
    snippets, latest, ev_total = table.snippets, table.latest, table.evidence_total
    page_status: dict[str, Counter[str]] = defaultdict(Counter)
    for s in snippets:
        page_status[s.page_id][s.status] += 1
    return HomeView(
        groups=groups, total=listing.total, arch_facets=dict(sorted(everything.facets.get("arch", {}).items(), key=_arch_order)),
        type_facets=everything.facets.get("type", {}), page_status=page_status,
        status_counts=Counter(s.status for s in snippets), snippet_total=len(snippets), evidence_total=ev_total, latest=latest,
    )  # fmt: skip


def target_order(name: str) -> tuple[int, str]:
    """`sm_80` < `sm_90a` < `sm_100a` (numeric, not alphabetical)."""
    m = re.match(r"sm_?(\d+)", name)
    return (int(m.group(1)) if m else 0, name)


def _arch_order(item: tuple[str, int]) -> tuple[int, str]:
    return target_order(item[0])


def listing_as_results(listing: PageList) -> SearchPublic:
    """A filtered page list in the shape of search results (for `/search?tag=…` without words)."""
    results = [
        SearchResult(id=p.id, title=p.title, type=p.type, path=p.path, architectures=p.architectures, score=0.0,
                     section=None, snippet=html.escape(", ".join(p.tags)))
        for p in listing.pages
    ]  # fmt: skip
    return SearchPublic(query="", total=listing.total, limit=listing.limit, offset=listing.offset, next=listing.next,
                        results=results, facets=listing.facets, took_ms=0.0)  # fmt: skip


@dataclass
class DashboardRow:
    """One snippet × target line of the evidence dashboard."""

    snippet: SnippetPublic
    page_title: str
    target: TargetEvidence


@dataclass
class DashboardView:
    rows: list[DashboardRow]
    total: int
    statuses: dict[str, int]  # status → rows, before the status filter
    targets: list[str]
    pages: list[tuple[str, str]]  # (id, title)
    latest: dict[str, Any] | None


def dashboard_rows(s: SnippetPublic, page_title: str) -> list[DashboardRow]:
    """One row per target of a snippet; a single row for a sketch or an invalid block."""
    if s.mode in ("sketch", "error"):
        note = snippet_evidence(s, "invalid attributes").note
        assert note is not None
        return [DashboardRow(s, page_title, TargetEvidence("—", note.status, [note]))]
    targets = list(s.targets) + [t for t in s.evidence if t not in s.targets]
    return [DashboardRow(s, page_title, target_evidence(t, s.evidence.get(t, []))) for t in targets]


def dashboard_view(store: Store, web: WebState, status: str | None, target: str | None, page: str | None) -> DashboardView:
    """Every snippet × target, failures first, filtered by status, target and page."""
    table = snippet_table(store, web)
    rows = table.rows
    all_targets = sorted({r.target.target for r in rows if r.target.target != "—"}, key=target_order)
    pages = sorted({(r.snippet.page_id, r.page_title) for r in rows}, key=lambda p: p[1].lower())
    if target:
        rows = [r for r in rows if r.target.target == target]
    if page:
        rows = [r for r in rows if r.snippet.page_id == page]
    statuses = Counter(r.target.status for r in rows)
    if status:
        rows = [r for r in rows if r.target.status == status]
    rows = sorted(rows, key=lambda r: (rank(r.target.status), r.snippet.page_id, r.snippet.position, target_order(r.target.target)))
    ordered = {s: statuses[s] for s in STATUS_ORDER if statuses.get(s)}
    return DashboardView(rows, len(rows), ordered, all_targets, pages, table.latest)
