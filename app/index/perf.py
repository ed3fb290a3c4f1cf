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
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from snippets.diagnostic import Diagnostic
from snippets.page import Page

CLAIM_FIELDS = ("gpu", "dtype", "shape", "metric", "value", "utilization", "source_id", "source_locator")
"""The fields of one claim the format defines (others are kept in `data`)."""

REQUIRED_FIELDS = ("gpu", "metric", "value")
"""Without these a claim says nothing checkable: lint warns."""

BINDING_KEYS = ("measured_by", "metric_key", "tolerance")
"""kernelwiki's keys binding a claim to the program that measures it (app/evidence/measured_claims.py checks them)."""
DEFAULT_TOLERANCE = 0.10
MAX_TOLERANCE = 1.0
SNIPPET_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*:[0-9]+$")
"""measured_by names a snippet: PAGE_ID:N."""
METRIC_KEY = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
"""metric_key names a harness metric (the names runner/metrics.py accepts)."""


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
    measured_by: str | None = None  # the snippet id (PAGE_ID:N) whose runs measure it
    metric_key: str | None = None  # which of that program's harness metrics
    tolerance: float = DEFAULT_TOLERANCE  # relative (0.08 = 8%)
    problems: list[str] = field(default_factory=list)  # binding-key errors of this item (lint: errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "page_id": self.page_id,
            "position": self.position,
            **{k: getattr(self, k) for k in CLAIM_FIELDS},
            "value_as_written": self.data.get("value"),
            "measured_by": self.measured_by,
            "metric_key": self.metric_key,
            "tolerance": self.tolerance if self.measured_by else None,
            "extra": {k: v for k, v in self.data.items() if k not in CLAIM_FIELDS + BINDING_KEYS},
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        n = float(str(value).replace(",", "").strip())
    except ValueError:
        return None
    return n if math.isfinite(n) else None


def _binding(item: dict[str, Any]) -> tuple[str | None, str | None, float, list[str]]:
    """measured_by, metric_key, tolerance of one item, and what is wrong with them."""
    problems = []
    measured_by = _text(item.get("measured_by")) if item.get("measured_by") not in (None, "") else None
    metric_key = _text(item.get("metric_key")) if item.get("metric_key") not in (None, "") else None
    if measured_by is not None and not SNIPPET_ID.match(measured_by):
        problems.append(f"measured_by must be a snippet id (PAGE_ID:N), not {measured_by!r}")
    if metric_key is not None and not METRIC_KEY.match(metric_key):
        problems.append(f"metric_key must be a harness metric name ([a-z0-9_.-]), not {metric_key!r}")
    if measured_by and not metric_key:
        problems.append("'measured_by' needs 'metric_key' (which of the program's metrics)")
    tolerance = DEFAULT_TOLERANCE
    if "tolerance" in item:
        tol = _number(item.get("tolerance"))
        if tol is None or not 0 < tol <= MAX_TOLERANCE:
            problems.append(f"tolerance must be a number in (0, {MAX_TOLERANCE:g}] (relative), not {item.get('tolerance')!r}")
        else:
            tolerance = tol
    return measured_by, metric_key, tolerance, problems


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
        measured_by, metric_key, tolerance, binding_problems = _binding(item)
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
                measured_by=measured_by,
                metric_key=metric_key,
                tolerance=tolerance,
                problems=binding_problems,
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
    """A stored row back as a claim (the binding keys read again from the item as written)."""
    data = json.loads(row.data)
    measured_by, metric_key, tolerance, problems = _binding(data if isinstance(data, dict) else {})
    return PerformanceClaim(
        page_id=row.page_id,
        position=row.position,
        **{k: getattr(row, k) for k in CLAIM_FIELDS},
        data=data,
        measured_by=measured_by,
        metric_key=metric_key,
        tolerance=tolerance,
        problems=problems,
    )


Annotate = Callable[[Any, list[PerformanceClaim]], list[dict[str, Any]]]
"""Turns claims into API objects (the service passes app/measured_claims.with_measurements)."""


def _plain(conn: Any, claims: list[PerformanceClaim]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in claims]


def claims_of_page(conn: Any, page_id: str, annotate: Annotate = _plain) -> list[dict[str, Any]]:
    """A page's stored claims as API objects, in page order (`annotate` adds each one's measurement)."""
    from app.index.models import PerformanceClaimRow, table_of

    t = table_of(PerformanceClaimRow)
    rows = conn.execute(t.select().where(t.c.page_id == page_id).order_by(t.c.position)).all()
    return annotate(conn, [from_row(r) for r in rows])


@dataclass(frozen=True)
class ClaimFilters:
    """Filters of the claims listing: exact gpu / metric / page (case-insensitive gpu and metric)."""

    gpu: str | None = None
    metric: str | None = None
    page: str | None = None


def list_claims(
    conn: Any, filters: ClaimFilters, limit: int = 100, offset: int = 0, annotate: Annotate = _plain
) -> dict[str, Any]:
    """One window of every page's claims, filtered; the total; counts per gpu and per metric (facets)."""
    from sqlalchemy import func, select

    from app.index.models import PageRow, PerformanceClaimRow, table_of

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
    views = annotate(conn, [from_row(r) for r in rows])
    items = [{**v, "page_title": r.page_title} for v, r in zip(views, rows, strict=True)]
    return {
        "items": items,
        "total": total,
        "offset": offset,
        "next": offset + limit if offset + limit < total else None,
        "facets": facets,
    }
