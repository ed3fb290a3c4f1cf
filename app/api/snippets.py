"""Snippets and their evidence (runners post evidence through app/api/evidence.py)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query

from app.deps import Limit, Offset, SettingsDep, StoreDep
from app.schemas import EvidencePublic, SnippetPublic

router = APIRouter(prefix="/api", tags=["snippets"])


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
