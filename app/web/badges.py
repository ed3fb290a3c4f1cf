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

from app.evidence.store import target_status
from app.schemas import EvidencePublic, SnippetPublic
from runner.status import LABEL as STATUS_LABEL, WORST_FIRST as STATUS_ORDER, gpu_word, rank, step_rank

__all__ = [
    "STATUS_LABEL",
    "STATUS_ORDER",
    "Badge",
    "SnippetEvidence",
    "TargetEvidence",
    "gpu_word",
    "rank",
    "snippet_evidence",
    "target_evidence",
]

WARNING = "warning"
"""The badge status of a compiler warning that limits what a pass proves."""
SYMBOL = {
    "pass": "✓",
    "xfail": "✓",
    "fail": "✗",
    "error": "✗",
    "timeout": "✗",
    "skipped": "⏸",
    "unverified": "~",
    "syntax-ok": "≈",
    "stale": "↻",
    "unknown": "·",
    "partial": "◐",
    WARNING: "⚠",
}
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
    summary: Badge | None = None  # what holds over every declared target, in words


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
        if step == "ncu":
            return Badge("pass", f"Nsight Compute counters as asserted on {data.get('gpu_name') or target}")
        return Badge("pass", f"{step.upper() if step in ('sass', 'ptx') else step} checks pass on {target}")
    if status == "xfail":
        return Badge("xfail", f"fails to {step} on {target}, as expected")
    if status == "timeout":
        limit = data.get("duration_s")
        return Badge(
            "timeout", f"{target}: {step} timed out" + (f" after {limit:g} s" if isinstance(limit, (int, float)) else "")
        )
    if status in ("fail", "error"):
        return Badge(status, f"{target}: {error_line(record)}")
    if status == "skipped":
        if step == "run":
            reason = re.sub(r"^not run:\s*", "", first_line(record.message), flags=re.IGNORECASE)
            return Badge("skipped", f"not run: {reason or f'no {gpu_word(target)} GPU'}")
        return Badge("skipped", f"{target}: {first_line(record.message) or f'{step} skipped'}")
    if status == "unverified":
        return Badge("unverified", f"unverified on {target}" + (f": {first_line(record.message)}" if record.message else ""))
    if status == "syntax-ok":
        return Badge("syntax-ok", f"syntax ok on {target}: byte-compiled only, never run")
    return Badge(status, f"{step} {status} on {target}")


def warning_badges(record: EvidencePublic) -> list[Badge]:
    """A passing record's compiler warnings that limit what the pass proves (e.g. ptxas ignored setmaxnreg)."""
    if record.stale or record.status != "pass":
        return []
    return [Badge(WARNING, f"{record.target}: {w}") for w in record.warnings]


def target_evidence(target: str, records: list[EvidencePublic], status: str | None = None) -> TargetEvidence:
    """Badges for one target, in build order (compile, checks, run), each step's warnings after it.

    `status`: the target's status as its snippet's summary judged it (every step the mode needs);
    without it, the worst of the steps present.
    """
    records = sorted(records, key=lambda r: step_rank(r.step))
    if not records:
        return TargetEvidence(target, status or "unknown", [Badge("unknown", f"not yet verified on {target}")])
    badges = [b for r in records for b in (step_badge(r, target), *warning_badges(r))]
    status = status or target_status(records)
    if status == "unknown":
        badges.append(Badge("unknown", f"not fully verified on {target}: a step its mode needs has no record"))
    return TargetEvidence(target, status, badges, records, max(r.timestamp for r in records))


def snippet_evidence(snippet: SnippetPublic, error: str | None = None) -> SnippetEvidence:
    """The evidence panel of one snippet: a note for sketches and invalid blocks, else per target."""
    if snippet.mode == "sketch":
        return SnippetEvidence(snippet, [], Badge("unverified", "sketch (unverified)"))
    if snippet.mode == "fragment":
        return SnippetEvidence(snippet, [], Badge("unverified", "fragment: not a complete program (unverified)"))
    if snippet.mode == "error":
        return SnippetEvidence(snippet, [], Badge("error", f"invalid snippet: {first_line(error) or 'see the page lint'}"))
    targets = list(snippet.targets) + [t for t in snippet.evidence if t not in snippet.targets]
    panels = [target_evidence(t, snippet.evidence.get(t, []), snippet.target_status.get(t)) for t in targets]
    summary = Badge(snippet.status, snippet.summary) if snippet.summary else None
    return SnippetEvidence(snippet, panels, summary=summary)


def describe(value: Any) -> str:
    """A record field as short text for the provenance table."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(describe(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={describe(v)}" for k, v in value.items())
    return "" if value is None else str(value)
