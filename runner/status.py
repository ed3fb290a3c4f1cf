"""Evidence statuses, their one order, and what a snippet's evidence proves.

The one home of these rules: the runner (standard library only), the service's
API, its HTML views and `kernelwiki lint` all import them from here.

A *record* (one snippet × target × step) has one of `RECORD_STATUSES`. The
service adds two: `stale` (a record made for other snippet content) and
`unknown` (no record). A *target* of a snippet is judged on the steps its mode
needs (`needed_steps`): compile, the SASS checks when the block declares
some, and the run for `run` blocks. A *snippet* is `pass` only when every
declared target passed every needed step; when some targets are verified and
others could not be (no GPU of that architecture, not yet verified) it is
`partial`, and `summarize_snippet` says in words exactly what holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

SYNTAX_OK = "syntax-ok"
"""A Python block that is not a program: it was byte-compiled, nothing more (shown as "syntax ok"; never a pass)."""

RECORD_STATUSES = ("pass", "fail", "xfail", "timeout", "error", "skipped", "unverified", SYNTAX_OK)
"""What one step can end as. pass; fail; xfail = an expected compile failure that happened; timeout;
error = an infrastructure fault or an invalid block; skipped = could not be done here (no GPU, no tool);
unverified = a sketch, a fragment, or code that never reached the assembler; syntax-ok = Python that only
passed a syntax check. Only pass and xfail count as verified."""

STALE = "stale"  # a record made for other content of the snippet
UNKNOWN = "unknown"  # no record at all
PARTIAL = "partial"  # a snippet verified on some of its declared targets only

WORST_FIRST = ("error", "timeout", "fail", STALE, UNKNOWN, "unverified", SYNTAX_OK, "skipped", PARTIAL, "xfail", "pass")
"""The one order of statuses, worst first: of a target over its steps, of a snippet over its targets,
and of every list and count that shows them."""

FAILING = frozenset({"fail", "timeout", "error"})
"""Statuses that make `verify` exit with 1 (and that no pass elsewhere outweighs)."""

VERIFIED = frozenset({"pass", "xfail"})
"""Statuses that prove what the block claims."""

LABEL = {
    "error": "error",
    "timeout": "timed out",
    "fail": "failed",
    STALE: "stale",
    UNKNOWN: "not yet verified",
    "unverified": "unverified",
    SYNTAX_OK: "syntax ok",
    "skipped": "not run",
    PARTIAL: "partly verified",
    "xfail": "fails as expected",
    "pass": "passed",
}
"""How a status reads in a sentence or on a chip."""

STEP_ORDER = ("compile", "ptx", "sass", "check", "run", "ncu")
"""Steps in build order (how badges are listed)."""


def rank(status: str) -> int:
    """Sort key putting the worst status first (an unknown word sorts last)."""
    return WORST_FIRST.index(status) if status in WORST_FIRST else len(WORST_FIRST)


def worst(statuses: Iterable[str], default: str = UNKNOWN) -> str:
    """The worst of `statuses` in `WORST_FIRST` order; `default` when there is none."""
    ranked = sorted(statuses, key=rank)
    return ranked[0] if ranked else default


def step_rank(step: str) -> int:
    """Sort key of a step in build order."""
    return STEP_ORDER.index(step) if step in STEP_ORDER else len(STEP_ORDER)


def needed_steps(mode: str, sass_checked: bool) -> tuple[str, ...]:
    """The steps a target must pass for a block of `mode` (`sass_checked`: it declares sass=/no_sass=)."""
    if mode == "run":
        return ("compile", "sass", "run") if sass_checked else ("compile", "run")
    if mode == "compile":
        return ("compile", "sass") if sass_checked else ("compile",)
    return ("compile",)  # compile_fail (an expected error leaves nothing to check), sketch, error


def target_status(steps: Mapping[str, str], needed: Sequence[str] | None = None) -> str:
    """One target's status from the status of each step's current record (`stale` already substituted).

    A failure or stale record on any step wins; otherwise the worst of the needed steps, a missing one
    counting as `unknown`. Without `needed`, the worst of the steps present.
    """
    bad = [s for s in steps.values() if s in FAILING or s == STALE]
    if bad:
        return worst(bad)
    if needed is None:
        return worst(steps.values())
    return worst(steps.get(step, UNKNOWN) for step in needed)


@dataclass(frozen=True)
class StepFact:
    """What the summary needs of one step's current record."""

    status: str  # a record status, or `stale`
    message: str = ""


@dataclass(frozen=True)
class SnippetSummary:
    """A snippet's overall status, the sentence that says what holds, and each declared target's status."""

    status: str
    text: str
    targets: dict[str, str] = field(default_factory=dict)


def gpu_word(target: str) -> str:
    """`sm_100a` → `SM100`: how a reader names the GPU a target needs."""
    m = re.match(r"sm_?(\d+)", target, re.IGNORECASE)
    return f"SM{m.group(1)}" if m else target


def skip_reason(target: str, message: str) -> str:
    """'not run: no sm_100 device here' → 'no SM100 GPU'; other reasons in the runner's words."""
    m = re.search(r"no (sm_?\d+\w*) device", message)
    if m or not message.strip():
        return f"no {gpu_word(target)} GPU"
    return re.sub(r"^not run:\s*", "", message.strip().splitlines()[0], flags=re.IGNORECASE)


def _phrase(mode: str, target: str, status: str, steps: Mapping[str, StepFact], needed: Sequence[str]) -> tuple[str, str]:
    """(what holds, why not more) for one target; targets saying the same are said together."""
    compiled = steps.get("compile") is not None and steps["compile"].status == "pass"
    if status == "pass":
        return ("ran on" if mode == "run" else "compiled for"), ""
    if status == "xfail":
        return "fails to compile, as expected, for", ""
    if status == "skipped" and compiled and steps.get("run") is not None and steps["run"].status == "skipped":
        return "compiled for", skip_reason(target, steps["run"].message)
    if status == "skipped" and compiled and steps.get("sass") is not None and steps["sass"].status == "skipped":
        return "compiled for", "SASS not checked"
    if status == UNKNOWN and compiled:
        missing = [step for step in needed if step not in steps]
        return "compiled for", "not yet run" if missing == ["run"] else f"{_and(missing)} not yet done"
    if status == UNKNOWN:
        return "not yet verified on", ""
    if status == STALE:
        return "stale (recorded for older code) on", ""
    failed = [step for step, fact in steps.items() if fact.status == status]
    step = min(failed, key=step_rank) if failed else ""
    if status == SYNTAX_OK:
        return "syntax checked only (not run) for", ""
    word = {"fail": "failed", "timeout": "timed out", "error": "error", "unverified": "unverified", "skipped": "not checked"}.get(
        status, status
    )
    return f"{step} {word} on".strip(), ""


def honest_python(lang: str, mode: str, step: str, status: str) -> str:
    """A Python `compile` block's passing compile step is `syntax-ok`: byte-compiling proves the syntax, not the code."""
    return SYNTAX_OK if lang == "python" and mode == "compile" and step == "compile" and status == "pass" else status


def summarize_snippet(
    mode: str, targets: Sequence[str], evidence: Mapping[str, Mapping[str, StepFact]], sass_checked: bool
) -> SnippetSummary:
    """What a snippet's evidence proves over its declared `targets` (evidence for other targets is ignored).

    e.g. `partial`, "ran on sm_90a · compiled for sm_100a, no SM100 GPU".
    """
    if mode == "sketch":
        return SnippetSummary("unverified", "sketch: shown as written, never compiled")
    if mode == "fragment":
        return SnippetSummary("unverified", "fragment: not a complete program")
    if mode == "error":
        return SnippetSummary("error", "invalid block: see the page lint")
    declared = list(dict.fromkeys(targets)) or sorted(evidence)
    needed = needed_steps(mode, sass_checked)
    per_target = {t: target_status({s: f.status for s, f in evidence.get(t, {}).items()}, needed) for t in declared}
    if not per_target:
        return SnippetSummary(UNKNOWN, "no target to verify")
    statuses = set(per_target.values())
    overall = worst(statuses)
    if overall not in FAILING and overall != STALE and not statuses <= VERIFIED and statuses & VERIFIED:
        overall = PARTIAL
    # (verified first, then the rest) × (what holds, whether a reason follows) → targets, reasons
    groups: dict[tuple[bool, str, bool], tuple[list[str], list[str]]] = {}
    for t in declared:
        head, reason = _phrase(mode, t, per_target[t], evidence.get(t, {}), needed)
        names, reasons = groups.setdefault((per_target[t] not in VERIFIED, head, bool(reason)), ([], []))
        names.append(t)
        if reason:
            reasons.append(reason)
    parts = []
    for (_, head, _), (names, reasons) in sorted(groups.items(), key=lambda kv: kv[0][0]):
        parts.append(f"{head} {', '.join(names)}" + (f", {or_reasons(reasons)}" if reasons else ""))
    return SnippetSummary(overall, " · ".join(parts), per_target)


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def or_reasons(reasons: Sequence[str]) -> str:
    """'no SM89 GPU', 'no SM100 GPU' → 'no SM89 or SM100 GPU'; other reasons joined with '; '."""
    unique = list(dict.fromkeys(reasons))
    gpus = [m.group(1) for r in unique if (m := re.fullmatch(r"no (\S+) GPU", r))]
    if len(gpus) == len(unique):
        return f"no {' or '.join(gpus)} GPU"
    return "; ".join(unique)
