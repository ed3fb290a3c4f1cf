"""`PerGeneration`: answers that change only with the wiki, kept per index generation (app/cache.py's `LRU`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from app.cache import LRU
from app.index.db import index_generation

T = TypeVar("T")


class PerGeneration:
    """`make()` once per index generation and key, in a small LRU (the answers are small): a reindex moves the
    generation, so an old answer is never asked for again and ages out."""

    def __init__(self, size: int) -> None:
        self._cache: LRU[Any] = LRU(size)

    def get(self, conn: Connection, key: Hashable, make: Callable[[], T]) -> T:
        value: T = self._cache.get_or_make((index_generation(conn), key), make)
        return value
