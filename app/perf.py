"""Performance claims: a page's `performance_claims` read, checked, stored and filtered, in one place.

The KernelWiki format lets a page state what a kernel achieved, one item per
claim: `gpu`, `dtype`, `shape`, `metric`, `value`, `utilization`, `source_id`,
`source_locator`. kernelwiki stores each item as a row (PerformanceClaimRow),
shows them as a table on the page, returns them from GET /api/pages/{id},
GET /api/performance-claims (filters gpu=, metric=, page=) and the MCP
get_page tool.

Extending (d25measure binds claims to measurements): add the field to
`CLAIM_FIELDS` (or read it from `PerformanceClaim.data`, which keeps every
key as written) and to `claim_problems`; the table, the API and the MCP answer
read `PerformanceClaim.to_dict()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from snippets.diagnostic import Diagnostic
from snippets.page import Page

CLAIM_FIELDS = ("gpu", "dtype", "shape", "metric", "value", "utilization", "source_id", "source_locator")
"""The fields of one claim the format defines (others are kept in `data`)."""

REQUIRED_FIELDS = ("gpu", "metric", "value")
"""Without these a claim says nothing checkable: lint warns."""


@dataclass
class PerformanceClaim:
    """One performance claim of a page."""

    page_id: str
    position: int  # 1-based order on the page
    gpu: str | None = None  # as written: "B200", "H200"
    dtype: str | None = None
    shape: str | None = None
    metric: str | None = None  # "TFLOPS", "GB/s", "us"
    value: float | None = None  # None when the page's value is not a number
    utilization: str | None = None
    source_id: str | None = None  # a source page backing the number
    source_locator: str | None = None  # where in that source
    data: dict[str, Any] = field(default_factory=dict)  # the item as written

    def to_dict(self) -> dict[str, Any]:
        return {
            "page_id": self.page_id,
            "position": self.position,
            **{k: getattr(self, k) for k in CLAIM_FIELDS},
            "value_as_written": self.data.get("value"),
            "extra": {k: v for k, v in self.data.items() if k not in CLAIM_FIELDS},
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_claims(page: Page) -> tuple[list[PerformanceClaim], list[Diagnostic]]:
    """A page's claims and the problems of their shape (warnings: the page is served as it is)."""
    raw = page.front.get("performance_claims")
    if raw is None:
        return [], []
    line = page.line_of("performance_claims")
    if not isinstance(raw, list):
        return [], [Diagnostic(page.path, line, "warning", "performance_claims must be a list of mappings")]
    claims: list[PerformanceClaim] = []
    problems: list[Diagnostic] = []
    for n, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            problems.append(Diagnostic(page.path, line, "warning", f"performance_claims item {n} is not a mapping; ignored"))
            continue
        missing = [k for k in REQUIRED_FIELDS if item.get(k) in (None, "")]
        if missing:
            problems.append(Diagnostic(page.path, line, "warning", f"performance_claims item {n} has no {', '.join(missing)}"))
        value = _number(item.get("value"))
        if item.get("value") is not None and value is None:
            problems.append(
                Diagnostic(page.path, line, "warning", f"performance_claims item {n}: value {item['value']!r} is not a number")
            )
        claims.append(
            PerformanceClaim(
                page_id=page.id,
                position=n,
                gpu=_text(item.get("gpu")),
                dtype=_text(item.get("dtype")),
                shape=_text(item.get("shape")),
                metric=_text(item.get("metric")),
                value=value,
                utilization=_text(item.get("utilization")),
                source_id=_text(item.get("source_id")),
                source_locator=_text(item.get("source_locator")),
                data=item,
            )
        )
    return claims, problems


def lint_claims_sources(page: Page, claims: list[PerformanceClaim], known_ids: set[str]) -> list[Diagnostic]:
    """A claim's source_id must name a page of the wiki (ideally one of the page's `sources`)."""
    line = page.line_of("performance_claims")
    return [
        Diagnostic(page.path, line, "warning", f"performance_claims item {c.position}: source_id '{c.source_id}' names no page")
        for c in claims
        if c.source_id and c.source_id not in known_ids
    ]


def rows_for(page: Page) -> list[dict[str, Any]]:
    """PerformanceClaimRow values of a page (the index writes them)."""
    claims, _ = read_claims(page)
    return [
        {
            "page_id": c.page_id,
            "position": c.position,
            **{k: getattr(c, k) for k in CLAIM_FIELDS},
            "data": json.dumps(c.data, default=str),
        }
        for c in claims
    ]


def from_row(row: Any) -> PerformanceClaim:
    """A stored row back as a claim."""
    return PerformanceClaim(
        page_id=row.page_id,
        position=row.position,
        **{k: getattr(row, k) for k in CLAIM_FIELDS},
        data=json.loads(row.data),
    )


def claims_of_page(conn: Any, page_id: str) -> list[dict[str, Any]]:
    """A page's stored claims as API objects, in page order."""
    from app.models import PerformanceClaimRow, table_of

    t = table_of(PerformanceClaimRow)
    rows = conn.execute(t.select().where(t.c.page_id == page_id).order_by(t.c.position)).all()
    return [from_row(r).to_dict() for r in rows]


@dataclass(frozen=True)
class ClaimFilters:
    """Filters of the claims listing: exact gpu / metric / page (case-insensitive gpu and metric)."""

    gpu: str | None = None
    metric: str | None = None
    page: str | None = None


def list_claims(conn: Any, filters: ClaimFilters, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """One window of every page's claims, filtered; the total; counts per gpu and per metric (facets)."""
    from sqlalchemy import func, select

    from app.models import PageRow, PerformanceClaimRow, table_of

    c = table_of(PerformanceClaimRow)
    p = table_of(PageRow)
    where = []
    if filters.gpu:
        where.append(func.lower(c.c.gpu) == filters.gpu.lower())
    if filters.metric:
        where.append(func.lower(c.c.metric) == filters.metric.lower())
    if filters.page:
        where.append(c.c.page_id == filters.page)
    total = conn.execute(select(func.count()).select_from(c).where(*where)).scalar() or 0
    rows = conn.execute(
        select(*c.c, p.c.title.label("page_title"))
        .join(p, p.c.id == c.c.page_id)
        .where(*where)
        .order_by(c.c.page_id, c.c.position)
        .limit(limit)
        .offset(offset)
    ).all()
    facets = {
        name: {
            str(v): n
            for v, n in conn.execute(
                select(column, func.count()).where(column.is_not(None)).group_by(column).order_by(func.count().desc(), column)
            )
        }
        for name, column in (("gpu", c.c.gpu), ("metric", c.c.metric))
    }
    items = [{**from_row(r).to_dict(), "page_title": r.page_title} for r in rows]
    return {
        "items": items,
        "total": total,
        "offset": offset,
        "next": offset + limit if offset + limit < total else None,
        "facets": facets,
    }
