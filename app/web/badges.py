"""Evidence → what a reader sees next to a code block: one badge per target and step.

A badge says in a few words what was proven where ("✓ compiles on sm_90a",
"✓ ran on NVIDIA H200", "✗ sm_100a: first error line", "⏸ not run: no SM100
GPU", "~ sketch (unverified)", "↻ stale"); the records behind it (full log,
resources, provenance) are shown when the reader opens it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.schemas import EvidencePublic, SnippetPublic
from app.store import _target_status as target_status

# Worst first: the order of the evidence dashboard and of a target's overall status.
STATUS_ORDER = ["error", "timeout", "fail", "stale", "unknown", "skipped", "unverified", "xfail", "pass"]
STATUS_LABEL = {
    "error": "error", "timeout": "timed out", "fail": "failed", "stale": "stale", "unknown": "not yet run",
    "skipped": "not run", "unverified": "unverified", "xfail": "fails as expected", "pass": "passed",
}  # fmt: skip
STEP_ORDER = {"compile": 0, "ptx": 1, "sass": 2, "check": 3, "run": 4}
SYMBOL = {"pass": "✓", "xfail": "✓", "fail": "✗", "error": "✗", "timeout": "✗", "skipped": "⏸",
          "unverified": "~", "stale": "↻", "unknown": "·"}  # fmt: skip
MAX_LINE = 160


@dataclass
class Badge:
    """One short verdict: symbol, words and the status that colours it."""

    status: str
    text: str

    @property
    def symbol(self) -> str:
        return SYMBOL.get(self.status, "·")


@dataclass
class TargetEvidence:
    """A snippet's evidence for one target: its badges and the records behind them."""

    target: str
    status: str
    badges: list[Badge]
    records: list[EvidencePublic] = field(default_factory=list)
    last_run: str | None = None


@dataclass
class SnippetEvidence:
    """Everything shown next to one code block."""

    snippet: SnippetPublic
    targets: list[TargetEvidence]
    note: Badge | None = None  # sketch or invalid block: one badge instead of per-target ones


def rank(status: str) -> int:
    """Sort key putting failures first."""
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def first_line(text: str | None) -> str:
    """The first non-empty line of `text`, cut to a readable length."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"
    return ""


def error_line(record: EvidencePublic) -> str:
    """The line that best says why a record failed: the compiler's error, else the message."""
    output = str(record.data.get("output") or "")
    for line in output.splitlines():
        if re.search(r"\berror\b", line, re.IGNORECASE):
            return first_line(line)
    return first_line(record.message) or first_line(output) or f"{record.step} {record.status}"


def gpu_word(target: str) -> str:
    """`sm_100a` → `SM100`: how a reader names the GPU a target needs."""
    m = re.match(r"sm_?(\d+)", target, re.IGNORECASE)
    return f"SM{m.group(1)}" if m else target


def step_badge(record: EvidencePublic, target: str) -> Badge:
    """The badge of one step's latest record."""
    step, status, data = record.step, record.status, record.data
    if record.stale:
        return Badge("stale", f"stale: {step} on {target} was for older code")
    if status == "pass":
        if step == "run":
            return Badge("pass", f"ran on {data.get('gpu_name') or target}")
        if step == "compile":
            return Badge("pass", f"compiles on {target}")
        return Badge("pass", f"{step.upper() if step in ('sass', 'ptx') else step} checks pass on {target}")
    if status == "xfail":
        return Badge("xfail", f"fails to {step} on {target}, as expected")
    if status == "timeout":
        limit = data.get("duration_s")
        return Badge("timeout", f"{target}: {step} timed out" + (f" after {limit:g} s" if isinstance(limit, (int, float)) else ""))
    if status in ("fail", "error"):
        return Badge(status, f"{target}: {error_line(record)}")
    if status == "skipped":
        if step == "run":
            reason = re.sub(r"^not run:\s*", "", first_line(record.message), flags=re.IGNORECASE)
            return Badge("skipped", f"not run: {reason or f'no {gpu_word(target)} GPU'}")
        return Badge("skipped", f"{target}: {first_line(record.message) or f'{step} skipped'}")
    if status == "unverified":
        return Badge("unverified", f"unverified on {target}" + (f": {first_line(record.message)}" if record.message else ""))
    return Badge(status, f"{step} {status} on {target}")


def target_evidence(target: str, records: list[EvidencePublic]) -> TargetEvidence:
    """Badges for one target, in build order (compile, checks, run)."""
    records = sorted(records, key=lambda r: STEP_ORDER.get(r.step, 9))
    if not records:
        return TargetEvidence(target, "unknown", [Badge("unknown", f"not yet verified on {target}")])
    badges = [step_badge(r, target) for r in records]
    return TargetEvidence(target, target_status(records), badges, records, max(r.timestamp for r in records))


def snippet_evidence(snippet: SnippetPublic, error: str | None = None) -> SnippetEvidence:
    """The evidence panel of one snippet: a note for sketches and invalid blocks, else per target."""
    if snippet.mode == "sketch":
        return SnippetEvidence(snippet, [], Badge("unverified", "sketch (unverified)"))
    if snippet.mode == "error":
        return SnippetEvidence(snippet, [], Badge("error", f"invalid snippet: {first_line(error) or 'see the page lint'}"))
    targets = list(snippet.targets) + [t for t in snippet.evidence if t not in snippet.targets]
    return SnippetEvidence(snippet, [target_evidence(t, snippet.evidence.get(t, [])) for t in targets])


def describe(value: Any) -> str:
    """A record field as short text for the provenance table."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(describe(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={describe(v)}" for k, v in value.items())
    return "" if value is None else str(value)
