"""The queries/ views of a KernelWiki repository, generated live from the index (never from the repository's files).

A KernelWiki repository commits generated indices under queries/ (by problem,
architecture, technique, kernel type, language, repo). kernelwiki builds the same
views from what it indexed, so they are never out of date: GET /api/queries/{view}
answers JSON, /queries/{view} the same data as a web page (one data function).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from app.index.models import ArchitectureRow, FacetRow, LanguageRow, PageRow, table_of


@dataclass(frozen=True)
class View:
    """One generated view: what it groups pages by."""

    name: str  # URL name: by-technique
    title: str
    group: str  # what a group's key is, in words


VIEWS = {
    v.name: v
    for v in (
        View("by-problem", "By problem / symptom", "symptom"),
        View("by-architecture", "By architecture", "architecture family"),
        View("by-technique", "By technique", "technique"),
        View("by-hardware-feature", "By hardware feature", "hardware feature"),
        View("by-kernel-type", "By kernel type", "kernel type"),
        View("by-language", "By language", "language"),
        View("by-repo", "By repository (PR sources)", "repository"),
    )
}
"""Every view, by URL name."""

PAGES_PER_GROUP = 50
"""Most pages listed under one group (the group's count is exact)."""

_FACET_OF = {
    "by-technique": "techniques",
    "by-hardware-feature": "hardware_features",
    "by-kernel-type": "kernel_types",
    "by-repo": "repo",
}


def _pairs(name: str) -> Any:
    """A selectable of distinct (value, page_id) pairs of a view."""
    f = table_of(FacetRow)

    def facet(field: str) -> Any:
        return select(f.c.value.label("value"), f.c.page_id.label("page_id")).where(f.c.facet == field)

    if name in _FACET_OF:
        return facet(_FACET_OF[name]).distinct()
    if name == "by-problem":
        return facet("symptoms").distinct()
    if name == "by-language":
        lang = table_of(LanguageRow)
        return select(lang.c.language.label("value"), lang.c.page_id.label("page_id")).distinct()
    if name == "by-architecture":
        a = table_of(ArchitectureRow)  # targets by family (sm90) and family names (blackwell)
        return select(a.c.family.label("value"), a.c.page_id.label("page_id")).distinct()
    raise KeyError(name)


def view_data(conn: Connection, name: str) -> dict[str, Any]:
    """A view's groups, largest first: {value, count, pages: [{id, title, type}], candidates (by-problem only)}.

    Built from the index on every call: counts per group and the first PAGES_PER_GROUP pages of each (by id)
    in SQL, then their titles (docs/benchmarks.md has the cost at 2,700 PR pages)."""
    view = VIEWS[name]
    pairs = _pairs(name).subquery()
    counts: dict[str, int] = {
        str(v): int(n) for v, n in conn.execute(select(pairs.c.value, func.count()).group_by(pairs.c.value))
    }
    total = conn.execute(select(func.count(func.distinct(pairs.c.page_id)))).scalar() or 0
    ranked = select(
        pairs.c.value, pairs.c.page_id, func.row_number().over(partition_by=pairs.c.value, order_by=pairs.c.page_id).label("rn")
    ).subquery()
    first = conn.execute(select(ranked.c.value, ranked.c.page_id).where(ranked.c.rn <= PAGES_PER_GROUP)).all()
    page = table_of(PageRow)
    ids = sorted({pid for _, pid in first})
    info = {
        r.id: {"id": r.id, "title": r.title, "type": r.type}
        for chunk in _chunks(ids)
        for r in conn.execute(select(page.c.id, page.c.title, page.c.type).where(page.c.id.in_(chunk)))
    }
    groups: dict[str, list[dict[str, Any]]] = {}
    for value, pid in first:
        if pid in info:
            groups.setdefault(value, []).append(info[pid])
    candidates: dict[str, list[dict[str, Any]]] = {}
    if name == "by-problem":
        f = table_of(FacetRow)
        rows = conn.execute(select(f.c.page_id, f.c.value).where(f.c.facet == "candidate_techniques")).all()
        targets = sorted({v for pid, v in rows if pid in info})
        titles = {
            r.id: r.title for c in _chunks(targets) for r in conn.execute(select(page.c.id, page.c.title).where(page.c.id.in_(c)))
        }
        for pid, v in rows:
            if pid in info:
                candidates.setdefault(pid, []).append({"id": v, "title": titles.get(v), "resolved": v in titles})
    out = []
    for value, pages in sorted(groups.items(), key=lambda kv: (-counts.get(kv[0], 0), kv[0])):
        pages.sort(key=lambda p: (p["type"], p["title"].lower(), p["id"]))
        item: dict[str, Any] = {"value": value, "count": counts.get(value, len(pages)), "pages": pages}
        if name == "by-problem":
            item["candidates"] = {p["id"]: candidates.get(p["id"], []) for p in pages}
        out.append(item)
    return {"view": view.name, "title": view.title, "group": view.group, "groups": out, "total_pages": total}


def cached_view(state: Any, conn: Connection, name: str) -> dict[str, Any]:
    """`view_data`, kept per app (`state` is `app.state`) for the current index generation: a view changes only
    when the index does, so repeated requests between two reindexes are not rebuilt. Per app, never per process:
    two apps in one process (tests) never share an answer."""
    from app.cache import LRU
    from app.index.db import index_generation

    generation = index_generation(conn)
    if generation is None:
        return view_data(conn, name)
    cache = getattr(state, "query_views", None)
    if cache is None:
        cache = LRU[dict[str, Any]](2 * len(VIEWS))
        state.query_views = cache
    return cache.get_or_make((name, generation), lambda: view_data(conn, name))


def facet_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """Pages per value of the repository facets (techniques, hardware_features, kernel_types) and languages."""
    f = table_of(FacetRow)
    out: dict[str, dict[str, int]] = {}
    for facet in ("techniques", "hardware_features", "kernel_types"):
        out[facet] = {
            str(v): n
            for v, n in conn.execute(
                select(f.c.value, func.count())
                .where(f.c.facet == facet)
                .group_by(f.c.value)
                .order_by(func.count().desc(), f.c.value)
            )
        }
    lang = table_of(LanguageRow)
    out["languages"] = {
        str(v): n
        for v, n in conn.execute(
            select(lang.c.language, func.count()).group_by(lang.c.language).order_by(func.count().desc(), lang.c.language)
        )
    }
    return out


def _chunks(items: list[str], size: int = 500) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
