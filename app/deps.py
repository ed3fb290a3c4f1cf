"""FastAPI dependencies: the store and settings of the running app (no globals)."""

from __future__ import annotations

import hmac
from typing import Annotated, Iterator

from fastapi import Depends, HTTPException, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.engine import Connection

from app.settings import Settings
from app.store import Filters, Store


def get_store(request: Request) -> Store:
    """The app's index; 503 (with the reason) while it cannot be opened."""
    store = request.app.state.store
    if store is None:
        status = getattr(request.app.state, "index_status", None)
        reason = getattr(status, "problem", None) or "the index is being opened"
        raise HTTPException(503, reason, headers={"Retry-After": "5"})
    return store


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

_FILTER = dict(max_length=100)


def get_filters(
    type: Annotated[str | None, Query(description="page type, e.g. hardware", **_FILTER)] = None,
    arch: Annotated[str | None, Query(description="GPU family: sm90 and sm90a both match sm90/sm90a pages", **_FILTER)] = None,
    tag: Annotated[str | None, Query(**_FILTER)] = None,
    language: Annotated[str | None, Query(**_FILTER)] = None,
    confidence: Annotated[str | None, Query(**_FILTER)] = None,
) -> Filters:
    return Filters(type=type or None, arch=arch or None, tag=tag or None, language=language or None, confidence=confidence or None)


FiltersDep = Annotated[Filters, Depends(get_filters)]
Limit = Annotated[int, Query(ge=1, le=200)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]


_bearer = HTTPBearer(auto_error=False, description="the runner token: `Authorization: Bearer $KERNELWIKI_RUNNER_TOKEN`")


def require_runner_token(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries `Authorization: Bearer <runner token>` (a bare token is refused).

    Runs before the body of the request is read, so an unauthenticated upload costs nothing.
    """
    expected = settings.runner_token.get_secret_value() if settings.runner_token else None
    given = credentials.credentials if credentials is not None else ""
    if not expected or not given or not hmac.compare_digest(given.encode(), expected.encode()):
        # Connection: close: the server drops the connection instead of draining an unread upload.
        raise HTTPException(401, "a valid runner token is required (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer", "Connection": "close"})
