"""Keyset pagination tokens: where a window ended, sent to clients as an opaque `next` (Datasette's `_next`).

A token is URL-safe base64 of the JSON list of the last row's sort key. The next window starts after that key
(`WHERE (a, b) > (:a, :b)` in SQL, which both SQLite and PostgreSQL answer by walking an index), so a deep window
costs what the first one does, where an OFFSET walks every row before it (at 100,000 pages on PostgreSQL,
/api/pages at offset 99,900 took 174 ms against 31 ms at offset 0).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, TypeVar

R = TypeVar("R")

NOT_OURS = "not a token this service gave out"


def token(key: tuple[Any, ...]) -> str:
    """The token of a sort key (strings and integers)."""
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def key_of(value: str, types: tuple[type, ...]) -> tuple[Any, ...]:
    """The sort key a `token` encoded, its parts of `types` in order; ValueError for anything else."""
    try:
        key = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: "[[[[…" nested ~1,000 deep
        raise ValueError(NOT_OURS) from exc
    if not (isinstance(key, list) and len(key) == len(types)):
        raise ValueError(NOT_OURS)
    # bool is an int to isinstance: a key part is never a bool
    if not all(isinstance(part, kind) and not isinstance(part, bool) for part, kind in zip(key, types, strict=True)):
        raise ValueError(NOT_OURS)
    return tuple(key)


def window(rows: Sequence[R], limit: int) -> tuple[Sequence[R], R | None]:
    """`rows` fetched `limit + 1` (one more than a window holds, to learn whether more follow) cut to the window, and
    its last row when more follow (the row whose sort key the next token holds), else None."""
    return rows[:limit], (rows[limit - 1] if len(rows) > limit else None)
