"""The toolchain × target matrix: every snippet compiled by every installed CUDA release, and its flips.

`run_matrix` verifies the wiki compile-only once per toolchain (runner/verify.py, with the
result cache keyed by toolchain, so a nightly run rebuilds only what changed: new content or a
new toolchain) and keeps each clean build's SASS and PTX (runner/artifacts.py). Its result is
one `MatrixCell` per snippet × target × toolchain, written as JSONL beside the evidence.

`find_flips` compares neighbouring toolchains (by release) for each snippet × target and reports
what changed meaning: a status change, a `compile_fail` block that starts compiling, a `sass=`
check that stops matching, registers up or down by `REGISTER_FLIP` or more, spills appearing,
a new ptxas warning. `known_good` turns a snippet's row into one line: "known good: CUDA
12.9–13.1 · fail since 13.1".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from runner.artifacts import ArtifactStore
from runner.evidence import EvidenceRecord
from runner.nvrtc import NVRTC_UNSUPPORTED
from runner.status import worst
from runner.toolchain import Toolchain
from runner.toolchains import SYSTEM, release_key, select_toolchain
from runner.verify import load_snippets, verify

REGISTER_FLIP = 0.20
"""Registers moving by this fraction (or more) between neighbouring toolchains is a flip."""

UNSUPPORTED = "unsupported"
"""Cell status where a toolchain cannot build the block: 12.x wheels have no nvcc, so cpp blocks and cuda blocks that
need libcu++/CuTe/CUTLASS (runner/nvrtc.py) are not built; without NVRTC installed, no cuda block is."""

GOOD = frozenset({"pass", "xfail"})

DEVICE_ONLY_LABEL = "(device only)"
"""How the label of a 12.x toolchain building through NVRTC ends (runner/toolchain.py): its cells are device code only."""
"""Cell statuses that mean the snippet does what its page says with that toolchain."""


@dataclass
class MatrixCell:
    """One snippet × target × toolchain."""

    snippet_id: str  # `PAGE_ID:N`
    page_id: str  # its page
    target: str  # e.g. "sm_90a"
    release: str  # CUDA release of the toolchain, e.g. "13.1"
    toolchain: str  # e.g. "nvcc 13.1.115"
    content_hash: str  # the snippet content this was observed for
    mode: str  # compile | run | compile_fail | …
    lang: str  # cuda | cpp | ptx | python
    status: str  # worst step status (pass, fail, xfail, …) or "unsupported"
    message: str = ""  # first error or reason
    registers: int | None = None  # ptxas: max registers over the snippet's functions
    smem_bytes: int | None = None  # ptxas: max static shared memory
    spill_bytes: int | None = None  # ptxas: spill stores + loads
    warnings: list[str] = field(default_factory=list)  # meaning-changing compiler warnings
    sass_check: str | None = None  # status of the sass=/no_sass= step (None: no SASS checks)
    resources: dict[str, Any] = field(default_factory=dict)  # the full ptxas report
    sass: str | None = None  # sha256 of the normalised SASS in the artifact store
    ptx: str | None = None  # sha256 of the normalised PTX
    note: str = ""  # why an artifact is missing
    timestamp: str = ""  # when observed

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _CELL_FIELDS}  # asdict() deep-copies: 10x slower on a matrix

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatrixCell:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_CELL_FIELDS = tuple(f.name for f in fields(MatrixCell))


@dataclass
class Flip:
    """Something that changed meaning between two neighbouring toolchains."""

    snippet_id: str  # the snippet
    page_id: str  # its page
    target: str  # the target
    before: str  # older release
    after: str  # newer release
    kind: str  # status | compile_fail compiles | sass check | registers | spills | warning
    detail: str  # what changed, in words
    before_sass: str | None = None  # artifact hashes, for the diff of the two listings
    after_sass: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MatrixReport:
    """One matrix run."""

    cells: list[MatrixCell] = field(default_factory=list)  # every snippet × target × toolchain
    releases: list[str] = field(default_factory=list)  # toolchains run, oldest first
    seconds: dict[str, float] = field(default_factory=dict)  # release -> wall-clock seconds of its verification
    builds: dict[str, int] = field(default_factory=dict)  # release -> snippet × target results computed
    cache_hits: dict[str, int] = field(default_factory=dict)  # release -> results from the cache
    flips: list[Flip] = field(default_factory=list)  # between neighbouring releases


def cells_from_records(records: Iterable[EvidenceRecord], release: str, toolchain: Toolchain) -> list[MatrixCell]:
    """Fold a verification's records (one per step) into cells (one per snippet × target)."""
    steps: dict[tuple[str, str], list[EvidenceRecord]] = {}
    for r in records:
        steps.setdefault((r.snippet_id, r.target), []).append(r)
    cells = []
    for (sid, target), recs in steps.items():
        compile_rec = next((r for r in recs if r.step == "compile"), recs[0])
        sass_rec = next((r for r in recs if r.step == "sass"), None)
        relevant = [r.status for r in recs if not (r.step == "run" and r.status == "skipped")]
        status = worst(relevant, default="pass")
        if not toolchain.nvcc and compile_rec.lang in ("cuda", "cpp") and compile_rec.status in ("error", "skipped"):
            if compile_rec.error_kind == NVRTC_UNSUPPORTED or not toolchain.nvrtc:
                status = UNSUPPORTED  # 12.x: host code, or a header NVRTC has not here; without NVRTC no C++ at all
        message = next((r.message for r in recs if r.status not in GOOD and r.message), "")
        if status in GOOD and compile_rec.toolchain.endswith(DEVICE_ONLY_LABEL):
            message = compile_rec.message  # "NVRTC device-only build (CUDA 12.9): device code only; host code not built: main"
        res = compile_rec.resources or {}
        spills = (res.get("spill_store_bytes") or 0) + (res.get("spill_load_bytes") or 0) if res else None
        art = getattr(compile_rec, "artifacts", {}) or {}
        cells.append(
            MatrixCell(
                snippet_id=sid,
                page_id=compile_rec.page_id,
                target=target,
                release=release,
                toolchain=compile_rec.toolchain,
                content_hash=compile_rec.content_hash,
                mode=compile_rec.mode,
                lang=compile_rec.lang,
                status=status,
                message=message[:500],
                registers=res.get("registers"),
                smem_bytes=res.get("smem_bytes"),
                spill_bytes=spills,
                warnings=list(dict.fromkeys(w for r in recs for w in r.warnings)),
                sass_check=sass_rec.status if sass_rec else None,
                resources=res,
                sass=art.get("sass"),
                ptx=art.get("ptx"),
                note=art.get("note", ""),
                timestamp=compile_rec.timestamp,
            )
        )
    return cells


def run_matrix(
    pages_root: Path | str,
    releases: list[str],
    toolchains_root: Path,
    *,
    store: ArtifactStore | None,
    pages: list[str] | None = None,
    targets: list[str] | None = None,
    jobs: int = 2,
    cache_dir: Path | str | None = None,
    isolation: str | None = None,
    progress: Callable[[str, float, int, int], None] | None = None,
) -> MatrixReport:
    """Verify compile-only with each toolchain in `releases` ("system" included) and collect the cells.

    `progress(release, seconds, builds, cache_hits)` after each toolchain."""
    report = MatrixReport()
    snippets, _ = load_snippets(pages_root, pages)  # once for every toolchain (the page problems are lint's business)
    for name in releases:
        tc = select_toolchain(name, toolchains_root)
        release = tc.nvcc_release or name
        if release in report.releases:
            continue  # "system" is one of the installed releases: built once
        started = time.monotonic()
        result = verify(
            pages_root,
            pages=pages,
            targets=targets,
            jobs=jobs,
            compile_only=True,
            cache_dir=cache_dir,
            toolchain=tc,
            isolation=isolation,
            artifacts=store,
            snippets=snippets,
        )
        report.seconds[release] = round(time.monotonic() - started, 2)
        report.builds[release], report.cache_hits[release] = result.builds, result.cache_hits
        report.releases.append(release)
        report.cells += cells_from_records(result.records, release, tc)
        if progress is not None:
            progress(release, report.seconds[release], result.builds, result.cache_hits)
    report.releases.sort(key=release_key)
    report.flips = find_flips(report.cells)
    return report


def matrix_stamp(pages_root: Path | str, names: list[str], toolchains_root: Path, extra: list[str] | None = None) -> str:
    """What a matrix run depends on, hashed: every page file's bytes, each toolchain's identity (an installed
    release's wheel manifest, the system nvcc's `--version`), the disassembler, the runner's version and `extra`.
    The same stamp as the last run means nothing changed: the cells on disk are current (a warm run)."""
    from runner.toolchain import _run_version, discover_toolchain  # the system nvcc's identity, as its fingerprint says
    from runner.toolchains import DISASM, MANIFEST
    from runner.verify import RUNNER_VERSION
    from snippets.page import iter_page_files

    digest = hashlib.sha256(f"{RUNNER_VERSION}|{extra or []}".encode())
    root = Path(pages_root).resolve()  # iter_page_files gives resolved paths: a relative --wiki failed here
    for path in iter_page_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for name in [*names, DISASM]:
        manifest = toolchains_root / name / MANIFEST
        if manifest.is_file():
            digest.update(manifest.read_bytes())
        elif name == SYSTEM:
            tc = discover_toolchain()
            digest.update(f"{tc.fingerprint}|{_run_version([tc.nvcc]) if tc.nvcc else ''}".encode())
        else:
            digest.update(f"missing {name}".encode())
    return digest.hexdigest()


def _by_row(cells: Iterable[MatrixCell]) -> dict[tuple[str, str], list[MatrixCell]]:
    rows: dict[tuple[str, str], list[MatrixCell]] = {}
    for c in cells:
        rows.setdefault((c.snippet_id, c.target), []).append(c)
    for row in rows.values():
        row.sort(key=lambda c: release_key(c.release))
    return rows


def find_flips(cells: Iterable[MatrixCell]) -> list[Flip]:
    """Changes of meaning between neighbouring releases, for every snippet × target (cells of one content each)."""
    flips: list[Flip] = []
    for _, row in sorted(_by_row(cells).items()):
        row = [c for c in row if c.status != UNSUPPORTED]
        for old, new in zip(row, row[1:], strict=False):
            if old.content_hash != new.content_hash:
                continue

            def add(kind: str, detail: str, old: MatrixCell = old, new: MatrixCell = new) -> None:
                flips.append(
                    Flip(new.snippet_id, new.page_id, new.target, old.release, new.release, kind, detail, old.sass, new.sass)
                )

            if old.mode == "compile_fail" and old.status == "xfail" and new.status == "fail":
                add("compile_fail compiles", f"the expected compile failure no longer happens with CUDA {new.release}")
            elif old.status != new.status:
                add(
                    "status",
                    f"{old.status} with CUDA {old.release} → {new.status} with {new.release}: {new.message or old.message}"[:400],
                )
            if old.sass_check == "pass" and new.sass_check == "fail":
                add("sass check", f"a sass= check stops matching with CUDA {new.release}")
            if old.registers and new.registers and abs(new.registers - old.registers) >= REGISTER_FLIP * old.registers:
                add(
                    "registers",
                    f"registers {old.registers} → {new.registers} ({(new.registers - old.registers) / old.registers:+.0%})",
                )
            if not old.spill_bytes and new.spill_bytes:
                add("spills", f"spills appear: {new.spill_bytes} bytes of spill stores and loads with CUDA {new.release}")
            for w in new.warnings:
                if w not in old.warnings:
                    add("warning", f"new warning with CUDA {new.release}: {w}"[:400])
    return flips


def _ranges(releases: list[str]) -> str:
    return f"{releases[0]}–{releases[-1]}" if len(releases) > 1 else releases[0]


def known_good(cells: Iterable[MatrixCell]) -> str:
    """One snippet's matrix as a line: "known good: CUDA 12.9–13.1 · fail since 13.1" ("" without cells), with
    "· 12.8–12.9: device code only (NVRTC)" where good releases built only the device code."""
    cells = list(cells)
    per_release: dict[str, list[str]] = {}
    for c in cells:
        if c.status != UNSUPPORTED:
            per_release.setdefault(c.release, []).append(c.status)
    if not per_release:
        return ""
    ordered = sorted(per_release, key=release_key)
    status = {r: ("good" if all(s in GOOD for s in per_release[r]) else worst(per_release[r], default="pass")) for r in ordered}
    good = [r for r in ordered if status[r] == "good"]
    parts = [f"known good: CUDA {_ranges(good)}"] if good else ["known good: none"]
    last = status[ordered[-1]]
    if last != "good":
        start = len(ordered) - 1
        while start > 0 and status[ordered[start - 1]] == last:
            start -= 1
        parts.append(f"{last} since {ordered[start]}" if start > 0 else f"{last} on CUDA {_ranges(ordered)}")
    elif len(good) != len(ordered):
        bad = [r for r in ordered if status[r] != "good"]
        parts.append(f"not good on {', '.join(bad)}")
    device_only = sorted(
        {c.release for c in cells if c.release in good and c.toolchain.endswith(DEVICE_ONLY_LABEL)}, key=release_key
    )
    if device_only:
        parts.append(f"{_ranges(device_only)}: device code only (NVRTC)")
    return " · ".join(parts)


def write_cells(path: Path | str, cells: Iterable[MatrixCell]) -> int:
    """Write cells as JSONL, sorted (stable diffs of the committed file); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(cells, key=lambda c: (c.page_id, c.snippet_id, c.target, release_key(c.release)))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for c in rows:
            fh.write(json.dumps(c.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(path)
    return len(rows)


def read_cells(path: Path | str) -> list[MatrixCell]:
    """Cells written by `write_cells` (a bad line raises ValueError naming it)."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(MatrixCell.from_dict(json.loads(line)))
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{path}:{n}: not a matrix cell: {exc}") from None
    return out


__all__ = ["SYSTEM", "Flip", "MatrixCell", "MatrixReport", "find_flips", "known_good", "read_cells", "run_matrix", "write_cells"]
