"""A KernelWiki repository's own fields: performance claims, the queries/ views, and the repository facets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request

from app.deps import ConnDep, Offset
from app.evidence.measured_claims import with_measurements
from app.index.perf import ClaimFilters, list_claims
from app.index.repository_queries import VIEWS, cached_view, facet_counts

router = APIRouter(prefix="/api", tags=["repository"])
Param = Annotated[str | None, Query(max_length=200)]


@router.get("/performance-claims")
def performance_claims(
    conn: ConnDep,
    gpu: Annotated[
        str | None, Query(max_length=200, description="only claims for this GPU (case-insensitive), e.g. B200")
    ] = None,
    metric: Annotated[str | None, Query(max_length=200, description="only claims of this metric, e.g. TFLOPS")] = None,
    page: Annotated[str | None, Query(max_length=200, description="only this page's claims")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Every page's performance_claims, filtered by gpu=/metric=/page=, with counts per gpu and metric."""
    filters = ClaimFilters(gpu=gpu, metric=metric, page=page)
    return list_claims(conn, filters, limit=limit, offset=offset, annotate=with_measurements)  # each with its measurement


@router.get("/queries")
def queries() -> dict[str, Any]:
    """The generated views (by problem, architecture, technique, hardware feature, kernel type, language, repo)."""
    return {"views": [{"name": v.name, "title": v.title, "url": f"/api/queries/{v.name}"} for v in VIEWS.values()]}


@router.get("/queries/{view}")
def query_view(request: Request, conn: ConnDep, view: str) -> dict[str, Any]:
    """One view, generated from the index (rebuilt after every reindex): groups of pages, largest first."""
    if view not in VIEWS:
        raise HTTPException(404, f"no view '{view}' (views: {', '.join(VIEWS)})")
    return cached_view(request.app.state, conn, view)


@router.get("/facets")
def facets(conn: ConnDep) -> dict[str, Any]:
    """Pages per technique, hardware feature, kernel type and language."""
    return facet_counts(conn)
