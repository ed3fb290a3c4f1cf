"""`GET /api/health`: index counts and the first indexing errors."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.deps import StoreDep

router = APIRouter(prefix="/api", tags=["health"])


@router.get("/health")
def health(store: StoreDep) -> dict[str, Any]:
    return store.health()
