"""Kept SASS/PTX, diffs and the toolchain matrix (app/evidence/artifacts.py): one router, JSON.

GET /api/snippets/{id}/sass?target=sm_90a[&toolchain=13.0]
GET /api/snippets/{id}/ptx?target=…[&toolchain=…]
GET /api/snippets/{id}/diff?a=sm_90a&b=sm_100a            target against target
GET /api/snippets/{id}/diff?a=13.0&b=13.1&target=sm_90a   toolchain against toolchain
GET /api/snippets/{id}/matrix
GET /api/changes[?page=…]                                  flips between neighbouring toolchains
POST /api/matrix/cells                                     a queue worker's matrix job result (runner token)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool

from app.deps import EvidenceDep, SettingsDep, require_runner_token
from app.evidence.artifacts import ArtifactNotFound, Listing, families, matrix_data
from app.evidence.ingest import JSONProblem, parse_json
from app.evidence.matrix_cells import MatrixRefused, accept_post

router = APIRouter(prefix="/api", tags=["artifacts"])

Target = Annotated[str | None, Query(max_length=32, pattern=r"^sm_\w+$", description="e.g. sm_90a")]
Release = Annotated[str | None, Query(max_length=64, description="CUDA release (13.0) or toolchain label")]


def _listing_json(listing: Listing) -> dict[str, Any]:
    out: dict[str, Any] = {
        "snippet_id": listing.snippet_id,
        "target": listing.target,
        "release": listing.release,
        "toolchain": listing.toolchain,
        "kind": listing.kind,
        "sha256": listing.sha256,
        "status": listing.status,
        "resources": listing.resources,
        "text": listing.text,
    }
    if listing.kind == "sass":
        out["families"] = families(listing.text)
    return out


def _get(request: Request, snippet_id: str, target: str | None, toolchain: str | None, kind: str) -> dict[str, Any]:
    try:
        return _listing_json(matrix_data(request).listing(snippet_id, target, toolchain, kind))
    except ArtifactNotFound as exc:
        raise HTTPException(404, str(exc)) from None


@router.get("/snippets/{snippet_id}/sass")
def snippet_sass(request: Request, snippet_id: str, target: Target = None, toolchain: Release = None) -> dict[str, Any]:
    """The normalised SASS of one snippet × target × toolchain (newest toolchain by default), source lines as `.line`."""
    return _get(request, snippet_id, target, toolchain, "sass")


@router.get("/snippets/{snippet_id}/ptx")
def snippet_ptx(request: Request, snippet_id: str, target: Target = None, toolchain: Release = None) -> dict[str, Any]:
    """The normalised PTX of one snippet × target × toolchain."""
    return _get(request, snippet_id, target, toolchain, "ptx")


@router.get("/snippets/{snippet_id}/diff")
def snippet_diff(
    request: Request,
    snippet_id: str,
    a: Annotated[str, Query(min_length=1, max_length=64, description="a target (sm_90a) or a release (13.0)")],
    b: Annotated[str, Query(min_length=1, max_length=64, description="the other side, of the same kind as a")],
    target: Target = None,
) -> dict[str, Any]:
    """Two SASS listings aligned by source line, with resource deltas and the families on one side only."""
    if a.startswith("sm_") != b.startswith("sm_"):
        raise HTTPException(422, "a, b: compare two targets (a=sm_90a&b=sm_100a) or two releases (a=13.0&b=13.1&target=sm_90a)")
    try:
        diff, left, right = matrix_data(request).diff(snippet_id, a, b, target)
    except ArtifactNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return diff.to_dict() | {
        "a_source": {k: getattr(left, k) for k in ("target", "release", "toolchain", "sha256")},
        "b_source": {k: getattr(right, k) for k in ("target", "release", "toolchain", "sha256")},
    }


@router.get("/snippets/{snippet_id}/matrix")
def snippet_matrix(request: Request, snippet_id: str) -> dict[str, Any]:
    """Targets × toolchains with status, registers and warnings, the known-good line and the flips."""
    try:
        return matrix_data(request).matrix(snippet_id)
    except ArtifactNotFound as exc:
        raise HTTPException(404, str(exc)) from None


@router.get("/changes")
def changes(
    request: Request,
    page: Annotated[str | None, Query(max_length=200, description="only this page's snippets")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """Flips between neighbouring toolchains, newest release first (status, compile_fail, sass check, registers, spills, warnings)."""
    flips = matrix_data(request).flips(page)
    window = flips[offset : offset + limit]
    nxt = f"limit={limit}&offset={offset + limit}" + (f"&page={page}" if page else "") if offset + limit < len(flips) else None
    return {"total": len(flips), "limit": limit, "offset": offset, "next": nxt, "changes": [f.to_dict() for f in window]}


@router.post("/matrix/cells", dependencies=[Depends(require_runner_token)])
async def post_matrix_cells(request: Request, evidence: EvidenceDep, settings: SettingsDep) -> dict[str, Any]:
    """Store a queue worker's matrix cells (one snippet × target × release each) and the SASS/PTX they name.

    Needs `Authorization: Bearer $KERNELWIKI_RUNNER_TOKEN`. The body is `{"cells": [...], "fingerprint": "…",
    "artifacts": {"sha256": "text"}}` (app/evidence/matrix_cells.py `MatrixPost`); 422 names the refused field,
    413 an oversized body. A cell older than the one stored for its key is kept out (`kept`).
    """
    from app.api.evidence import read_capped

    body = await read_capped(request, settings.evidence_max_body_bytes)
    try:
        raw = parse_json(body)
    except JSONProblem as exc:
        raise HTTPException(422, f"the body: {exc}") from None
    data = matrix_data(request)
    engine = evidence.writer or evidence.engine
    try:
        result = await run_in_threadpool(accept_post, engine, raw, data.store)
    except MatrixRefused as exc:
        raise HTTPException(422, str(exc)) from None
    return {"inserted": result.inserted, "replaced": result.replaced, "kept": result.kept}
