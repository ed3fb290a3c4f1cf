"""The toolchain matrix and the kept SASS/PTX, as the service reads them: one data layer for JSON, HTML and MCP.

The runner writes `EVIDENCE/matrix/cells.jsonl` (runner/matrix.py cells) and the content-addressed
listings under `EVIDENCE/artifacts/` (runner/artifacts.py). They are read from there, the cells
cached until the file changes; nothing here writes. Every lookup that cannot be answered raises
`ArtifactNotFound` with a message naming the parameter, which the routes turn into a 404.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.artifacts import ArtifactStore
from runner.matrix import Flip, MatrixCell, find_flips, known_good, read_cells
from runner.sass import parse_listing
from runner.sassdiff import SassDiff, diff_listings
from runner.toolchains import release_key

MATRIX_FILE = "matrix/cells.jsonl"
"""Where runner/matrix.py's cells are kept under the evidence folder (a subfolder: the evidence import reads only *.jsonl at the top)."""
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
    """The app's matrix reader (`app.state.matrix`), made on first use from the evidence folder setting;
    `holder` is the app or a request."""
    app = getattr(holder, "app", holder)
    data = getattr(app.state, "matrix", None)
    if data is None:
        data = app.state.matrix = MatrixData(app.state.settings.evidence)
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
    """Cells and artifacts under one evidence folder."""

    def __init__(self, evidence_dir: Path) -> None:
        self.path = Path(evidence_dir) / MATRIX_FILE
        self.store = ArtifactStore(Path(evidence_dir) / ARTIFACTS_DIR)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._cells: list[MatrixCell] = []
        self._by_snippet: dict[str, list[MatrixCell]] = {}

    def cells(self) -> list[MatrixCell]:
        """Every cell (re-read when the file changed; none when there is no file)."""
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._cells = read_cells(self.path) if stamp else []
                self._by_snippet = {}
                for c in self._cells:
                    self._by_snippet.setdefault(c.snippet_id, []).append(c)
                self._stamp = stamp
            return self._cells

    def snippet_cells(self, snippet_id: str) -> list[MatrixCell]:
        self.cells()
        return sorted(self._by_snippet.get(snippet_id, []), key=lambda c: (c.target, release_key(c.release)))

    def releases(self) -> list[str]:
        return sorted({c.release for c in self.cells()}, key=release_key)

    def listing(self, snippet_id: str, target: str | None, toolchain: str | None, kind: str) -> Listing:
        """The SASS or PTX of one snippet × target × toolchain (newest toolchain when none is named)."""
        cells = self.snippet_cells(snippet_id)
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

    def matrix(self, snippet_id: str) -> dict[str, Any]:
        """A snippet's targets × toolchains, its known-good line and its flips."""
        cells = self.snippet_cells(snippet_id)
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
        cells = [c for c in self.cells() if page_id is None or c.page_id == page_id]
        return sorted(find_flips(cells), key=lambda f: (release_key(f.after), f.snippet_id, f.target), reverse=True)


def families(listing_text: str) -> list[str]:
    """The mnemonics of a SASS listing, once each, in order of first use."""
    seen: dict[str, None] = {}
    for fn in parse_listing(listing_text):
        for insn in fn.instructions:
            seen.setdefault(insn.opcode, None)
    return list(seen)
