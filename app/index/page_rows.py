"""A parsed page as the rows of every table the index keeps for it (made in the parse workers).

One home for which columns a page's rows fill and in what order: the worker makes plain tuples in that
order (app/index/build.py), and the parent writes them with `app.index.db.insert_rows`, as COPY text on
PostgreSQL or executemany tuples on SQLite. Section rows leave their id to the database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.index.facets import facet_rows
from app.index.markdown import Outline
from app.index.models import (
    AliasRow,
    ArchitectureRow,
    FacetRow,
    LanguageRow,
    LinkRow,
    PageRow,
    PerformanceClaimRow,
    SectionRow,
    SnippetRow,
    SnippetTargetRow,
    TagRow,
)
from app.index.perf import CLAIM_FIELDS, rows_for as perf_rows
from snippets.architectures import family
from snippets.page import Page
from snippets.repository import ALIAS_OWN

COLUMNS: dict[Any, tuple[str, ...]] = {
    PageRow: (
        "id",
        "id_lower",
        "title",
        "title_lower",
        "type",
        "path",
        "confidence",
        "evidence_level",
        "meta",
        "body",
        "body_line",
        "toc",
        "content_hash",
        "description",
    ),
    AliasRow: ("page_id", "alias", "alias_lower", "rank"),
    TagRow: ("page_id", "tag"),
    LanguageRow: ("page_id", "language"),
    ArchitectureRow: ("page_id", "arch", "family"),
    LinkRow: ("source_id", "target_id", "kind", "resolved"),
    SectionRow: ("page_id", "position", "level", "heading", "anchor", "line", "text"),
    SnippetRow: ("id", "page_id", "position", "line", "lang", "mode", "targets", "content_hash", "data", "status"),
    SnippetTargetRow: ("snippet_id", "page_id", "position", "target", "target_order", "status", "status_rank"),
    FacetRow: ("page_id", "facet", "value"),
    PerformanceClaimRow: ("page_id", "position", *CLAIM_FIELDS, "data"),
}
"""Each table a page fills → its columns, in the order of the tuples `page_rows` makes (the insertion order)."""
TABLES = {table.__tablename__: table for table in COLUMNS}

ROWS_VERSION = 4
"""The version of what a page's rows hold for the same file and data files (the aliases merged, the architectures
kept): bump it when that changes, and every index reparses every page once (it is part of
app/index/build.py's `data_files_digest`), its full-text index following (app/search/sync.py)."""

FreshJudge = Callable[[dict[str, Any]], tuple[str, list[tuple[str, int, str, int]]]]
"""A snippet (`Snippet.to_dict()`) → its status and dashboard lines (target, target order, status, status rank)
while no evidence names it (app/evidence/store.py `status_without_evidence`)."""


def page_rows(
    page: Page, parsed: Outline, snippets: list[dict[str, Any]], description: str, judge: FreshJudge | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Table name → the rows of `page` (tuples in `COLUMNS` order); `snippets` are `Snippet.to_dict()`s.

    With `judge`, each snippet row carries the status it has without evidence, and its dashboard lines
    come with it (the reindex judges again, in SQL, the snippets that do have records); without, the
    status is left NULL (not yet judged).
    """
    pid = page.id
    meta = {
        "id": pid,
        "title": page.title,
        "type": page.type,
        "architectures": page.declared_architectures,  # families too: shown, faceted, searched (never built)
        "languages": page.languages,
        "tags": page.tags,
        "aliases": page.aliases,
        "confidence": page.confidence,
        "evidence_level": page.evidence_level,
        "evidence_basis": page.evidence_basis,
        "related": page.related,
        "sources": page.sources,
        **page.extra,
    }
    facets, claims = facet_rows(page), perf_rows(page)
    line = page.body_line - 1
    judged = [judge(d) if judge is not None else (None, []) for d in snippets]
    return {
        "page": [
            (
                pid,
                pid.lower(),
                page.title,
                page.title.lower(),
                page.type,
                page.path,
                page.confidence,
                page.evidence_level,
                json.dumps(meta),
                page.body,
                page.body_line,
                json.dumps(parsed.toc),
                page.content_hash,
                description,
            )
        ],
        "alias": [(pid, a, a.lower(), page.alias_ranks.get(a, ALIAS_OWN)) for a in page.aliases],
        "tag": [(pid, t) for t in page.tags],
        "language": [(pid, lang) for lang in page.languages],
        "architecture": [(pid, a, family(a)) for a in page.declared_architectures],
        "link": [(pid, t, kind, False) for kind in ("related", "sources") for t in getattr(page, kind)],
        "section": [(pid, s.position, s.level, s.heading, s.anchor, line + s.line, s.text) for s in parsed.sections],
        "snippet": [
            (
                d["id"],
                pid,
                d["index"],
                d["line"],
                d["lang"],
                d["mode"],
                json.dumps(d["targets"]),
                d["content_hash"],
                json.dumps(d),
                status,
            )
            for d, (status, _) in zip(snippets, judged, strict=True)
        ],
        "snippet_target": [
            (d["id"], pid, d["index"], *target_line)
            for d, (_, lines) in zip(snippets, judged, strict=True)
            for target_line in lines
        ],
        "facet": [(r["page_id"], r["facet"], r["value"]) for r in facets],
        "performance_claim": [tuple(r[c] for c in COLUMNS[PerformanceClaimRow]) for r in claims],
    }
