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

from app.models import ArchitectureRow, FacetRow, LanguageRow, PageRow, table_of


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


def _pairs(conn: Connection, name: str) -> list[tuple[str, str]]:
    """(group key, page id) pairs of a view."""
    if name in _FACET_OF:
        f = table_of(FacetRow)
        return [(v, p) for v, p in conn.execute(select(f.c.value, f.c.page_id).where(f.c.facet == _FACET_OF[name]))]
    if name == "by-language":
        lang = table_of(LanguageRow)
        return [(v, p) for v, p in conn.execute(select(lang.c.language, lang.c.page_id))]
    if name == "by-architecture":
        a = table_of(ArchitectureRow)
        f = table_of(FacetRow)
        pairs = [(v, p) for v, p in conn.execute(select(a.c.family, a.c.page_id).distinct())]
        pairs += [(v, p) for v, p in conn.execute(select(f.c.value, f.c.page_id).where(f.c.facet == "architecture_family"))]
        return pairs
    if name == "by-problem":
        f = table_of(FacetRow)
        return [(v, p) for v, p in conn.execute(select(f.c.value, f.c.page_id).where(f.c.facet == "symptoms"))]
    raise KeyError(name)


def view_data(conn: Connection, name: str) -> dict[str, Any]:
    """A view's groups, largest first: {value, count, pages: [{id, title, type}], candidates (by-problem only)}."""
    view = VIEWS[name]
    pairs = sorted(set(_pairs(conn, name)))
    ids = {p for _, p in pairs}
    page = table_of(PageRow)
    info: dict[str, Any] = {}
    for chunk in _chunks(sorted(ids)):
        for r in conn.execute(select(page.c.id, page.c.title, page.c.type).where(page.c.id.in_(chunk))):
            info[r.id] = {"id": r.id, "title": r.title, "type": r.type}
    groups: dict[str, list[dict[str, Any]]] = {}
    for value, pid in pairs:
        if pid in info:
            groups.setdefault(value, []).append(info[pid])
    candidates: dict[str, list[dict[str, Any]]] = {}
    if name == "by-problem":
        f = table_of(FacetRow)
        wanted = {p["id"] for ps in groups.values() for p in ps}
        rows = conn.execute(select(f.c.page_id, f.c.value).where(f.c.facet == "candidate_techniques")).all()
        targets = sorted({v for pid, v in rows if pid in wanted})
        titles = {
            r.id: r.title for c in _chunks(targets) for r in conn.execute(select(page.c.id, page.c.title).where(page.c.id.in_(c)))
        }
        for pid, v in rows:
            if pid in wanted:
                candidates.setdefault(pid, []).append({"id": v, "title": titles.get(v), "resolved": v in titles})
    out = []
    for value, pages in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        pages.sort(key=lambda p: (p["type"], p["title"].lower()))
        item: dict[str, Any] = {"value": value, "count": len(pages), "pages": pages[:PAGES_PER_GROUP]}
        if name == "by-problem":
            item["candidates"] = {p["id"]: candidates.get(p["id"], []) for p in pages[:PAGES_PER_GROUP]}
        out.append(item)
    return {"view": view.name, "title": view.title, "group": view.group, "groups": out, "total_pages": len(ids)}


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
