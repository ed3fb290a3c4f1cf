"""The toolchain matrix and the kept SASS/PTX, as the service reads them: one data layer for JSON, HTML and MCP.

The cells are read from the index (`matrix_cell`, app/evidence/matrix_cells.py: loaded from
`EVIDENCE/matrix/cells.jsonl` with the evidence, and posted by queue workers' matrix jobs); the
content-addressed listings from `EVIDENCE/artifacts/` (runner/artifacts.py). Nothing here writes.
Every lookup that cannot be answered raises `ArtifactNotFound` with a message naming the
parameter, which the routes turn into a 404.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection, Engine

from app.evidence import matrix_cells
from app.evidence.matrix_cells import MATRIX_FILE as MATRIX_FILE  # where the committed cells are (app/cli/toolchains.py)
from runner.artifacts import ArtifactStore
from runner.matrix import Flip, MatrixCell, find_flips, known_good
from runner.sass import parse_listing
from runner.sassdiff import SassDiff, diff_listings
from runner.toolchains import release_key

ARTIFACTS_DIR = "artifacts"

FAMILY_ALIASES = {
    "HGMMA": "wgmma",
    "UTCHMMA": "tcgen05.mma",
    "UTCQMMA": "tcgen05.mma",
    "LDTM": "tcgen05.ld",
    "STTM": "tcgen05.st",
}
"""SASS mnemonics whose page is found through a PTX name when no page lists the mnemonic itself as an alias."""


def matrix_data(holder: Any) -> MatrixData:
    """The app's matrix reader (`app.state.matrix`), made on first use from the evidence folder setting and the
    app's index; `holder` is the app or a request."""
    app = getattr(holder, "app", holder)
    data = getattr(app.state, "matrix", None)
    if data is None:
        data = app.state.matrix = MatrixData(app.state.settings.evidence, lambda: app.state.store.engine)
    return data


class ArtifactNotFound(LookupError):
    """What was asked for is not in the matrix; the message names the parameter."""


@dataclass
class Listing:
    """One kept listing and where it came from."""

    snippet_id: str  # PAGE_ID:N
    target: str  # e.g. sm_90a
    release: str  # CUDA release, e.g. 13.0
    toolchain: str  # e.g. nvcc 13.0.88
    kind: str  # sass | ptx
    sha256: str  # the artifact's hash
    text: str  # the normalised listing
    resources: dict[str, Any] = field(default_factory=dict)  # ptxas report of that build
    status: str = ""  # the cell's status


class MatrixData:
    """Cells in the index and artifacts under one evidence folder.

    The cells are read once per matrix generation (app/evidence/matrix_cells.py: it grows whenever a cell is
    stored or removed) and kept, by snippet, with their flips: a request costs one small query and lookups."""

    def __init__(self, evidence_dir: Path, engine: Engine | Callable[[], Engine]) -> None:
        self.store = ArtifactStore(Path(evidence_dir) / ARTIFACTS_DIR)
        self._engine = engine
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._cells: list[MatrixCell] = []
        self._by_snippet: dict[str, list[MatrixCell]] = {}
        self._flips: list[Flip] | None = None

    @property
    def engine(self) -> Engine:
        return self._engine if isinstance(self._engine, Engine) else self._engine()

    def _current(self, conn: Connection | None = None) -> list[MatrixCell]:
        """The cells, re-read when the matrix generation moved; through `conn` when given (a request holding one
        connection must not ask the pool for a second: a pool of one would wait, then fail)."""
        with nullcontext(conn) if conn is not None else self.engine.connect() as conn:
            gen = matrix_cells.generation(conn)
            with self._lock:
                if gen != self._generation:
                    self._cells = matrix_cells.all_cells(conn)
                    self._by_snippet = {}
                    for c in self._cells:  # in file order: by target, then release, within a snippet
                        self._by_snippet.setdefault(c.snippet_id, []).append(c)
                    self._flips = None
                    self._generation = gen
                return self._cells

    def cells(self, page_id: str | None = None) -> list[MatrixCell]:
        """Every cell (of one page when given)."""
        cells = self._current()
        return cells if page_id is None else [c for c in cells if c.page_id == page_id]

    def snippet_cells(self, snippet_id: str, conn: Connection | None = None) -> list[MatrixCell]:
        self._current(conn)
        return sorted(self._by_snippet.get(snippet_id, []), key=lambda c: (c.target, release_key(c.release)))

    def releases(self) -> list[str]:
        return sorted({c.release for c in self._current()}, key=release_key)

    def listing(
        self, snippet_id: str, target: str | None, toolchain: str | None, kind: str, conn: Connection | None = None
    ) -> Listing:
        """The SASS or PTX of one snippet × target × toolchain (newest toolchain when none is named)."""
        cells = self.snippet_cells(snippet_id, conn)
        if not cells:
            raise ArtifactNotFound(f"snippet: no matrix cells for '{snippet_id}'")
        targets = sorted({c.target for c in cells})
        target = target or targets[0]
        row = [c for c in cells if c.target == target]
        if not row:
            raise ArtifactNotFound(f"target: '{target}' is not a target of {snippet_id} (its targets: {', '.join(targets)})")
        if toolchain:
            chosen = [c for c in row if c.release == toolchain or c.toolchain == toolchain]
            if not chosen:
                have = ", ".join(c.release for c in row)
                raise ArtifactNotFound(f"toolchain: CUDA {toolchain} has no cell for {snippet_id} on {target} (have: {have})")
            cell = chosen[0]
        else:
            kept = [c for c in row if getattr(c, kind)]
            cell = (kept or row)[-1]
        digest = getattr(cell, kind)
        text = self.store.get(digest) if digest else None
        if text is None:
            why = cell.note or cell.message or f"the build's status is {cell.status}"
            raise ArtifactNotFound(f"{kind}: none kept for {snippet_id} on {target} with CUDA {cell.release}: {why}")
        return Listing(snippet_id, target, cell.release, cell.toolchain, kind, digest, text, cell.resources, cell.status)

    def diff(self, snippet_id: str, a: str, b: str, target: str | None) -> tuple[SassDiff, Listing, Listing]:
        """Target against target (`a`, `b` are targets) or toolchain against toolchain (releases, with `target`)."""
        if a.startswith("sm_") and b.startswith("sm_"):
            left, right = self.listing(snippet_id, a, None, "sass"), self.listing(snippet_id, b, None, "sass")
            if left.release != right.release:  # the same toolchain on both sides when both have one
                common = sorted(
                    {c.release for c in self.snippet_cells(snippet_id) if c.target == a and c.sass}
                    & {c.release for c in self.snippet_cells(snippet_id) if c.target == b and c.sass},
                    key=release_key,
                )
                if common:
                    left = self.listing(snippet_id, a, common[-1], "sass")
                    right = self.listing(snippet_id, b, common[-1], "sass")
        else:
            left, right = self.listing(snippet_id, target, a, "sass"), self.listing(snippet_id, target, b, "sass")
        la = a if a.startswith("sm_") else f"CUDA {left.release}"
        lb = b if b.startswith("sm_") else f"CUDA {right.release}"
        return diff_listings(left.text, right.text, la, lb, left.resources, right.resources), left, right

    def matrix(self, snippet_id: str, conn: Connection | None = None) -> dict[str, Any]:
        """A snippet's targets × toolchains, its known-good line and its flips."""
        cells = self.snippet_cells(snippet_id, conn)
        if not cells:
            raise ArtifactNotFound(f"snippet: no matrix cells for '{snippet_id}'")
        return {
            "snippet_id": snippet_id,
            "releases": sorted({c.release for c in cells}, key=release_key),
            "targets": sorted({c.target for c in cells}),
            "known_good": known_good(cells),
            "cells": [
                {
                    k: getattr(c, k)
                    for k in ("target", "release", "toolchain", "status", "registers", "smem_bytes", "spill_bytes", "warnings")
                }
                | {"sass_check": c.sass_check, "has_sass": bool(c.sass), "has_ptx": bool(c.ptx), "message": c.message}
                for c in cells
            ],
            "flips": [f.to_dict() for f in find_flips(cells)],
        }

    def flips(self, page_id: str | None = None) -> list[Flip]:
        """Every flip between neighbouring toolchains (of one page when given), newest release first."""
        cells = self._current()
        with self._lock:
            if self._flips is None:
                self._flips = sorted(
                    find_flips(cells), key=lambda f: (release_key(f.after), f.snippet_id, f.target), reverse=True
                )
            flips = self._flips
        return flips if page_id is None else [f for f in flips if f.page_id == page_id]


def families(listing_text: str) -> list[str]:
    """The mnemonics of a SASS listing, once each, in order of first use."""
    seen: dict[str, None] = {}
    for fn in parse_listing(listing_text):
        for insn in fn.instructions:
            seen.setdefault(insn.opcode, None)
    return list(seen)
