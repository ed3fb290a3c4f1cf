"""`LRU`: the service's one cache mechanism, a thread-safe least-recently-used cache on cachetools.

Every in-memory cache of app/ is an `LRU` (or, for a pure function of its arguments, `memoized`): the search
engine's answers, the facet and graph answers, the docs browser's renders, the `queries/` views, the agent
documents. Answers that change with the wiki are keyed by the index generation (`index_generation`, which every
reindex moves), and those that change with evidence too by the data version, so a cache never needs clearing to be
right: an old key is simply never asked for again and ages out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import cachetools

V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])


def _key(key: Hashable, _make: Callable[[], Any]) -> Hashable:
    return key


def _made(_key: Hashable, make: Callable[[], V]) -> V:
    return make()


class LRU(Generic[V]):
    """A thread-safe least-recently-used cache of at most `size` values (cachetools.LRUCache under one lock).

    `get_or_make` builds a missing value outside the lock. With `wait=True`, requests that ask for a value while
    it is being built wait for that one build instead of starting their own (cachetools' `condition`): for values
    that cost seconds.
    """

    def __init__(self, size: int, wait: bool = False) -> None:
        self.size = size
        self._items: cachetools.LRUCache[Hashable, V] = cachetools.LRUCache(maxsize=max(size, 1))
        self._lock = threading.Lock()
        condition = threading.Condition(self._lock) if wait else None
        self._get_or_make = cachetools.cached(self._items, key=_key, lock=self._lock, condition=condition)(_made)

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The cached value for `key`, building it with `make()` when missing (never cached when `size` is 0)."""
        if self.size <= 0:
            return make()
        return self._get_or_make(key, make)

    def get(self, key: Hashable) -> V | None:
        """The cached value for `key` (now the most recently used), or None."""
        with self._lock:
            return self._items.get(key)

    def put(self, key: Hashable, value: V) -> None:
        """Keep `value` for `key` (the least recently used value goes when full; nothing is kept when `size` is 0)."""
        if self.size > 0:
            with self._lock:
                self._items[key] = value

    def discard(self, key: Hashable) -> None:
        """Forget `key`'s value, if any."""
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def memoized(size: int) -> Callable[[F], F]:
    """A pure function's answers kept per arguments (hashable), at most `size` of them: `LRU`'s mechanism as a decorator."""

    def decorate(function: F) -> F:
        return cachetools.cached(cachetools.LRUCache(maxsize=size), lock=threading.Lock())(function)  # type: ignore[return-value]

    return decorate
