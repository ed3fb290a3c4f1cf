"""Snippets and their evidence (runners post evidence through app/api/evidence.py)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query

from app.deps import ConnDep, EvidenceDep, Limit, NextToken, Offset, sort_key
from app.evidence.status import SNIPPET_KEY, snippet_window
from app.evidence.store import HISTORY_LIMIT, HISTORY_MAX_LIMIT, HistoryKey
from app.keyset import token
from app.schemas import EvidenceList, SnippetList

router = APIRouter(prefix="/api", tags=["snippets"])


@router.get("/snippets", response_model=SnippetList)
def list_snippets(
    evidence: EvidenceDep,
    conn: ConnDep,
    page: Annotated[str | None, Query(max_length=200)] = None,
    lang: Annotated[str | None, Query(max_length=20)] = None,
    status: Annotated[str | None, Query(max_length=20)] = None,
    target: Annotated[str | None, Query(max_length=20)] = None,
    limit: Limit = 50,
    offset: Offset = 0,
    next: NextToken = None,  # noqa: A002 - Datasette's name for the keyset token
) -> SnippetList:
    """One window of snippets in page order with their latest evidence, the exact total and a `next` query."""
    after = sort_key(next, offset, SNIPPET_KEY)
    # filtered (the status is the one stored with the snippet), counted and paged in SQL; only the window's evidence is read
    window = snippet_window(
        conn,
        page_id=page or None,
        lang=lang or None,
        target=target or None,
        status=status or None,
        limit=limit,
        offset=offset,
        after=after,
    )
    found = {s.id: s for s in evidence.snippets_with_evidence(conn, ids=window.ids)} if window.ids else {}
    chosen = {k: v for k, v in {"page": page, "lang": lang, "status": status, "target": target}.items() if v}
    next_q = urlencode({**chosen, "limit": limit, "next": token(window.last)}) if window.last is not None else None
    return SnippetList(
        total=window.total,
        limit=limit,
        offset=None if after is not None else offset,
        next=next_q,
        snippets=[found[i] for i in window.ids if i in found],
    )


@router.get("/snippets/{snippet_id}/evidence", response_model=EvidenceList)
def snippet_evidence(
    evidence: EvidenceDep,
    conn: ConnDep,
    snippet_id: str,
    limit: Annotated[int, Query(ge=1, le=HISTORY_MAX_LIMIT, description="records in this window")] = HISTORY_LIMIT,
    next: Annotated[  # noqa: A002 - Datasette's name for the keyset token
        str | None, Query(max_length=2000, description="the `next` token of the previous window")
    ] = None,
) -> EvidenceList:
    """A snippet's records, newest first, one window at a time: follow `next` for the older ones."""
    try:
        after = HistoryKey.from_token(next) if next else None
    except ValueError as exc:
        raise HTTPException(422, f"next: {exc}; start without it, then pass the `next` of each answer") from None
    window = evidence.history(snippet_id, limit, after, conn=conn)
    if window is None:
        raise HTTPException(404, f"no snippet with id '{snippet_id}'")
    next_q = urlencode({"limit": limit, "next": window.next.token()}) if window.next is not None else None
    return EvidenceList(snippet_id=snippet_id, total=window.total, limit=limit, next=next_q, records=window.records)
