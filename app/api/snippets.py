"""Snippets and their evidence; `POST /api/evidence` for remote runners (token required)."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, HTTPException, Query

from app.deps import Limit, Offset, SettingsDep, StoreDep
from app.schemas import EvidencePublic, SnippetPublic

router = APIRouter(prefix="/api", tags=["snippets"])
MAX_RECORDS_PER_POST = 5000


@router.get("/snippets", response_model=list[SnippetPublic])
def list_snippets(
    store: StoreDep,
    page: Annotated[str | None, Query(max_length=200)] = None,
    lang: Annotated[str | None, Query(max_length=20)] = None,
    status: Annotated[str | None, Query(max_length=20)] = None,
    target: Annotated[str | None, Query(max_length=20)] = None,
    limit: Limit = 200,
    offset: Offset = 0,
) -> list[SnippetPublic]:
    with store.engine.connect() as conn:
        return store.evidence.snippets_with_evidence(conn, page_id=page, lang=lang, target=target, status=status, limit=limit, offset=offset)


@router.get("/snippets/{snippet_id}/evidence", response_model=list[EvidencePublic])
def snippet_evidence(store: StoreDep, snippet_id: str) -> list[EvidencePublic]:
    history = store.evidence.history(snippet_id)
    if history is None:
        raise HTTPException(404, f"no snippet with id '{snippet_id}'")
    return history


@router.post("/evidence")
def post_evidence(
    store: StoreDep,
    settings: SettingsDep,
    records: Annotated[list[dict[str, Any]], Body(description="runner evidence records (see runner/evidence.py)")],
    authorization: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    expected = settings.runner_token.get_secret_value() if settings.runner_token else None
    given = authorization.removeprefix("Bearer ").strip() if authorization else ""
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, "a valid runner token is required (Authorization: Bearer TOKEN)", headers={"WWW-Authenticate": "Bearer"})
    if len(records) > MAX_RECORDS_PER_POST:
        raise HTTPException(413, f"at most {MAX_RECORDS_PER_POST} records per request")
    result = store.evidence.add(records)
    if result.errors and not result.inserted and not result.duplicates:
        raise HTTPException(422, result.errors)
    return {"inserted": result.inserted, "duplicates": result.duplicates, "errors": result.errors}
