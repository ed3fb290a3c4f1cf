"""Web pages of a KernelWiki repository's own fields: performance claims and the queries/ views (same data as the API)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from app.deps import ConnDep, Offset
from app.evidence.measured_claims import with_measurements
from app.index.perf import ClaimFilters, list_claims
from app.index.repository_queries import VIEWS, cached_view, facet_counts
from app.web.respond import html_page

router = APIRouter(include_in_schema=False)
Param = Annotated[str | None, Query(max_length=200)]


@router.get("/performance-claims")
def performance_claims(request: Request, conn: ConnDep, gpu: Param = None, metric: Param = None, offset: Offset = 0) -> Response:
    """Every performance claim, filterable by GPU and metric."""
    filters = ClaimFilters(gpu=gpu or None, metric=metric or None)
    data = list_claims(conn, filters, limit=100, offset=offset, annotate=with_measurements)  # the API's objects
    return html_page(request, "claims.html", {"title": "Performance claims", "d": data, "gpu": gpu or "", "metric": metric or ""})


@router.get("/queries")
def queries(request: Request, conn: ConnDep) -> Response:
    """The generated views and the repository facets."""
    return html_page(request, "queries.html", {"title": "Views", "views": list(VIEWS.values()), "facets": facet_counts(conn)})


@router.get("/queries/{view}")
def query_view(request: Request, conn: ConnDep, view: str) -> Response:
    if view not in VIEWS:
        raise HTTPException(404, f"There is no view “{view}”.")
    return html_page(request, "query.html", {"title": VIEWS[view].title, "d": cached_view(request.app.state, conn, view)})
