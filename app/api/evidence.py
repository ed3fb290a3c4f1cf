"""`POST /api/evidence`: runners report verification records (runner token required).

The order of checks keeps a hostile client cheap: the token is checked by a
dependency before a byte of the body is read; the body is then read as it
streams in and refused (413) the moment it passes `evidence_max_body_bytes`;
only then is it parsed, each record checked by `EvidenceIn`, and the records
matched against the index's snippets. A post is stored whole or not at all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app.deps import EvidenceDep, SettingsDep, require_runner_token
from app.evidence.ingest import EvidenceIn, JSONProblem, parse_json
from app.schemas import ErrorAnswer

router = APIRouter(prefix="/api", tags=["evidence"])
MAX_RECORDS_PER_POST = 5000
CLOSE = {"Connection": "close"}
"""On a refused upload: the server closes the connection instead of draining the rest of the body."""


class EvidenceReceipt(BaseModel):
    """What a post stored."""

    inserted: int = Field(description="records new to the index")
    duplicates: int = Field(description="records already present (same record_id): posting twice is harmless")
    received_at: str = Field(description="the service's time of receipt, recorded with each new record")
    errors: list[str] = Field(default_factory=list, description="always empty: a post with a bad record is refused whole")


_ERROR = {"model": ErrorAnswer}
BODY_SCHEMA: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "array",
                "maxItems": MAX_RECORDS_PER_POST,
                "items": EvidenceIn.model_json_schema(),
                "description": "runner evidence records (runner/evidence.py); the body may not exceed `evidence_max_body_bytes` (8 MB by default)",
            }
        }
    },
}


async def read_capped(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is longer than `limit` bytes (never held beyond that)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise HTTPException(413, f"the body may not exceed {limit} bytes (Content-Length: {declared[:20]})", headers=CLOSE)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"the body may not exceed {limit} bytes", headers=CLOSE)
    return bytes(body)


@router.post(
    "/evidence",
    response_model=EvidenceReceipt,
    dependencies=[Depends(require_runner_token)],
    openapi_extra={"requestBody": BODY_SCHEMA},
    responses={401: _ERROR, 413: _ERROR, 422: _ERROR, 503: _ERROR},
)
async def post_evidence(request: Request, evidence: EvidenceDep, settings: SettingsDep) -> EvidenceReceipt:
    """Store runner records: each is checked against `EvidenceIn`, and its snippet must exist on its page.

    Needs `Authorization: Bearer $KERNELWIKI_RUNNER_TOKEN`. Timestamps are RFC 3339
    with a time zone; a long `output` is kept as head and tail. Answers 422 naming
    every refused record, 413 for an oversized body, 503 while the first index is built.
    """
    received_at = datetime.now(UTC)
    status = getattr(request.app.state, "index_status", None)
    if status is not None and not status.ready.is_set():
        raise HTTPException(503, "the index is still being built; post again in a few seconds", headers={"Retry-After": "5"})
    body = await read_capped(request, settings.evidence_max_body_bytes)
    try:
        raw = parse_json(body)
    except JSONProblem as exc:
        raise HTTPException(422, f"the body: {exc}") from None
    if not isinstance(raw, list):
        raise HTTPException(422, "the body must be a JSON array of evidence records")
    if len(raw) > MAX_RECORDS_PER_POST:
        raise HTTPException(413, f"at most {MAX_RECORDS_PER_POST} records per request")
    acceptance = await run_in_threadpool(evidence.accept, raw, received_at, True)  # the one acceptance rule
    if acceptance.refused:
        raise HTTPException(422, [f.message() for f in acceptance.refused[:100]])
    result = await run_in_threadpool(evidence.store, acceptance.records, "request", received_at)
    return EvidenceReceipt(
        inserted=result.inserted, duplicates=result.duplicates, received_at=received_at.isoformat(), errors=result.errors
    )
