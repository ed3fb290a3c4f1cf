"""Two normalised SASS listings (runner/sass.py) compared: per function, aligned by source line.

Both sides come from the same source (one target against another, or one toolchain against
another for the same target), so a source line is the one thing that means the same on both
sides; instructions are grouped under the line they came from and the groups are paired. The
result also says which instruction families (mnemonics) exist on one side only, and how the
ptxas resources moved (registers, shared memory, stack, spills).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runner.sass import Function, opcode_counts, parse_listing

RESOURCE_KEYS = ("registers", "smem_bytes", "stack_frame_bytes", "spill_store_bytes", "spill_load_bytes", "barriers")
"""ptxas figures compared between the two sides (runner/resources.py)."""


@dataclass
class LineRow:
    """The instructions one source line produced on each side."""

    segment: str  # translation-unit segment ("snippet", "chain-1", …; "" before any line info)
    line: int  # line in that segment (0: no line info)
    a: list[str] = field(default_factory=list)  # side A's instructions of this line, in order
    b: list[str] = field(default_factory=list)  # side B's
    same: bool = True  # the two lists are equal


@dataclass
class FunctionDiff:
    """One function on both sides."""

    name: str  # mangled name
    on: str  # "both", "a" or "b"
    rows: list[LineRow] = field(default_factory=list)  # in source order (segment order of first use, then line)
    a_count: int = 0  # instructions on side A
    b_count: int = 0  # on side B


@dataclass
class SassDiff:
    """Side A against side B."""

    a: str  # label of side A, e.g. "sm_90a" or "13.0"
    b: str  # label of side B
    functions: list[FunctionDiff] = field(default_factory=list)  # every function of either side
    families_only_a: list[str] = field(default_factory=list)  # mnemonics found only on side A
    families_only_b: list[str] = field(default_factory=list)  # only on side B
    family_counts: dict[str, list[int]] = field(default_factory=dict)  # mnemonic -> [count A, count B], where they differ
    resources: dict[str, list[int | None]] = field(default_factory=dict)  # key -> [A, B] (None: not reported)
    identical: bool = False  # the listings are the same

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(fn: Function | None) -> dict[tuple[str, int], list[str]]:
    groups: dict[tuple[str, int], list[str]] = {}
    if fn is None:
        return groups
    for insn in fn.instructions:
        groups.setdefault((insn.segment, insn.line), []).append(insn.text)
    return groups


def _order(a: dict[tuple[str, int], list[str]], b: dict[tuple[str, int], list[str]]) -> list[tuple[str, int]]:
    segments: list[str] = []
    for seg, _ in list(a) + list(b):
        if seg not in segments:
            segments.append(seg)
    return sorted(set(a) | set(b), key=lambda k: (segments.index(k[0]), k[1]))


def diff_listings(
    a_text: str,
    b_text: str,
    a_label: str = "a",
    b_label: str = "b",
    a_resources: dict[str, Any] | None = None,
    b_resources: dict[str, Any] | None = None,
) -> SassDiff:
    """Compare two normalised listings (and, when given, their ptxas resource reports)."""
    fa = {f.name: f for f in parse_listing(a_text)}
    fb = {f.name: f for f in parse_listing(b_text)}
    out = SassDiff(a=a_label, b=b_label, identical=a_text == b_text)
    for name in list(fa) + [n for n in fb if n not in fa]:
        left, right = fa.get(name), fb.get(name)
        ra, rb = _rows(left), _rows(right)
        fd = FunctionDiff(
            name,
            "both" if left and right else ("a" if left else "b"),
            a_count=len(left.instructions) if left else 0,
            b_count=len(right.instructions) if right else 0,
        )
        for key in _order(ra, rb):
            xa, xb = ra.get(key, []), rb.get(key, [])
            fd.rows.append(LineRow(key[0], key[1], xa, xb, xa == xb))
        out.functions.append(fd)
    ca, cb = opcode_counts(list(fa.values())), opcode_counts(list(fb.values()))
    out.families_only_a = sorted(set(ca) - set(cb))
    out.families_only_b = sorted(set(cb) - set(ca))
    out.family_counts = {k: [ca.get(k, 0), cb.get(k, 0)] for k in sorted(set(ca) | set(cb)) if ca.get(k, 0) != cb.get(k, 0)}
    for name in RESOURCE_KEYS:
        va = (a_resources or {}).get(name)
        vb = (b_resources or {}).get(name)
        if va is not None or vb is not None:
            out.resources[name] = [va, vb]
    return out


def changed_lines(diff: SassDiff) -> int:
    """How many source-line groups differ, over all functions."""
    return sum(1 for f in diff.functions for r in f.rows if not r.same)
