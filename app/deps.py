"""FastAPI dependencies: the store and settings of the running app (no globals)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from app.settings import Settings
from app.store import Filters, Store


def get_store(request: Request) -> Store:
    return request.app.state.store


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
