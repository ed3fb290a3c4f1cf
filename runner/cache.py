"""Result cache: a folder of JSON files keyed by what determines a result.

The key of one snippet × target covers the snippet's content hash (source,
chained blocks, prelude, mode, attributes, build recipe), the target, the
toolchain fingerprint (nvcc version and build, host compiler, python, whether
SASS can be read), the runner's flags (compile-only) and, for programs, the GPU
they would run on. Unchanged snippets are therefore never rebuilt; anything
that could change a result changes the key. Errors and timeouts are not
cached: they are retried next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from runner.outcome import StepOutcome

DEFAULT_CACHE_DIR = Path(".kernelwiki/cache")
"""Where results are kept unless told otherwise."""

CACHE_FORMAT = 1
"""Version of the cache file layout; part of every key."""

UNCACHEABLE = frozenset({"error", "timeout"})
"""Outcomes that are retried rather than remembered."""


def cache_key(*parts: Any) -> str:
    """sha256 of the parts (JSON-encoded)."""
    blob = json.dumps([CACHE_FORMAT, *parts], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


class ResultCache:
    """Outcomes of one snippet × target, stored as `DIR/ab/abcdef….json`."""

    def __init__(self, root: Path | str = DEFAULT_CACHE_DIR) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> list[StepOutcome] | None:
        """The cached outcomes, or None (a missing or unreadable file is a miss, never an error)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return [StepOutcome.from_dict(item) for item in data["outcomes"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(
        self, key: str, outcomes: list[StepOutcome], meta: dict[str, Any] | None = None, *, deterministic: bool = False
    ) -> bool:
        """Store outcomes atomically; returns False (and stores nothing) when one is not cacheable.

        `deterministic` outcomes (an invalid block's error, a sketch) depend on the content alone and are
        always stored, so that their records keep one timestamp and re-importing them adds nothing.
        """
        if not deterministic and any(o.status in UNCACHEABLE for o in outcomes):
            return False
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"meta": meta or {}, "outcomes": [o.to_dict() for o in outcomes]}, fh)
            os.replace(tmp, path)
        except OSError:
            return False
        return True
