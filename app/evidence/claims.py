"""A page's claims against its snippets' evidence: `confidence` and `evidence_level` may not say more than it shows.

The rule (docs/pages.md, "Confidence against evidence"):

* `confidence: verified` needs evidence: every `run` block must have run and passed on at least one of
  its declared targets, and at least one block of the page must be verified (pass, partial or xfail).
* `evidence_level: experiment` (or `benchmark`) needs a program that *measures*: a `run` block that
  passed on a declared target and whose recorded output reports a measured quantity, a number with a
  unit of time, rate or cycles (`49.2 us/iter`, `1.8 TB/s`, `412 cycles`, `3.1 TFLOP/s`). A program that
  only prints `OK` checks a result; it measures nothing.

`kernelwiki lint` applies it to the wiki and the evidence JSONL (warnings naming the front-matter line);
the service applies it to the index, and the page shows what it finds next to the claim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.evidence.ingest import current_rank
from runner.status import STALE, VERIFIED, StepFact, summarize_snippet

MEASURING_LEVELS = frozenset({"experiment", "benchmark"})
"""Evidence levels that claim a measurement."""

MEASUREMENT = re.compile(
    r"\b\d+(?:\.\d+)?\s*(?:ns|us|µs|ms|s/iter|cycles?|clocks?|clk|[KMGT]?B/s|[GT]?FLOP/s|[GT]?FLOPS|[GT]?B/cycle)(?![\w])",
    re.IGNORECASE,
)
"""A measured quantity in a program's output: a number and a unit of time, rate or cycles."""


@dataclass(frozen=True)
class SnippetFacts:
    """What the rule needs of one block: its mode, each declared target's status, passing run outputs."""

    id: str
    mode: str
    target_status: dict[str, str]
    run_outputs: list[str] = field(default_factory=list)  # output of current passing run records on declared targets


def measures(output: str) -> bool:
    """Whether a program's output reports a measured quantity (see MEASUREMENT)."""
    return MEASUREMENT.search(output or "") is not None


def claim_problems(confidence: str | None, evidence_level: str | None, snippets: Sequence[SnippetFacts]) -> list[tuple[str, str]]:
    """(front-matter key, why) for every claim of a page that its snippets' evidence does not back."""
    problems: list[tuple[str, str]] = []
    if confidence == "verified":
        never = [s.id for s in snippets if s.mode == "run" and "pass" not in s.target_status.values()]
        if never:
            problems.append(
                (
                    "confidence",
                    f"'verified', but {len(never)} program(s) never ran and passed on any declared target: {', '.join(never)}",
                )
            )
        if not any(set(s.target_status.values()) & VERIFIED for s in snippets):
            problems.append(("confidence", "'verified', but no block of the page is verified on any declared target"))
    if evidence_level in MEASURING_LEVELS and not any(measures(o) for s in snippets for o in s.run_outputs):
        problems.append(
            (
                "evidence_level",
                f"'{evidence_level}', but no program of the page measures: no passing run printed a "
                "number with a unit of time, rate or cycles (e.g. '49.2 us/iter')",
            )
        )
    return problems


def facts_from_public(snippets: Iterable[Any]) -> list[SnippetFacts]:
    """SnippetFacts from the API's SnippetPublic objects (the service's side)."""
    out = []
    for s in snippets:
        outputs = [
            str(r.data.get("output") or "")
            for t in s.targets
            for r in s.evidence.get(t, [])
            if r.step == "run" and r.status == "pass" and not r.stale
        ]
        out.append(SnippetFacts(s.id, s.mode, dict(s.target_status), outputs))
    return out


def facts_from_records(snippets: Iterable[Any], records: Iterable[Any]) -> list[SnippetFacts]:
    """SnippetFacts from runner Snippets and EvidenceRecords (lint's side: no index needed).

    Per snippet × target × step the record for the current content wins over a stale one, then the newest
    (app/evidence/ingest.py `current_rank`).
    """
    snippets = list(snippets)
    current = {s.id: s.content_hash for s in snippets}
    latest: dict[tuple[str, str, str], Any] = {}
    for r in records:
        if r.snippet_id not in current:
            continue
        key = (r.snippet_id, r.target, r.step)
        prev = latest.get(key)
        rank = current_rank(r.content_hash == current[r.snippet_id], getattr(r, "toolchain_release", None), r.timestamp)
        if prev is None or rank >= current_rank(
            prev.content_hash == current[r.snippet_id], getattr(prev, "toolchain_release", None), prev.timestamp
        ):
            latest[key] = r
    out = []
    for s in snippets:
        evidence: dict[str, dict[str, StepFact]] = {}
        outputs: list[str] = []
        for (sid, target, step), r in latest.items():
            if sid != s.id:
                continue
            stale = r.content_hash != s.content_hash
            evidence.setdefault(target, {})[step] = StepFact(STALE if stale else r.status, r.message or "")
            if step == "run" and r.status == "pass" and not stale and target in s.targets:
                outputs.append(r.output or "")
        sass = bool(s.checks.get("sass") or s.checks.get("no_sass"))
        summary = summarize_snippet(s.mode, list(s.targets), evidence, sass)
        out.append(SnippetFacts(s.id, s.mode, summary.targets, outputs))
    return out


def read_evidence(folder: Path) -> tuple[list[Any], list[str]]:
    """Every record of `folder/*.jsonl`, and 'file:line: error: …' for what cannot be read."""
    from runner.evidence import read_jsonl

    records: list[Any] = []
    errors: list[str] = []
    for path in sorted(Path(folder).glob("*.jsonl")) if Path(folder).is_dir() else []:
        try:
            records.extend(read_jsonl(path))
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            text = str(exc)
            errors.append(
                text.replace(": not an evidence record:", ": error: not an evidence record:", 1)
                if text.startswith(str(path))
                else f"{path}:1: error: {text}"
            )
    return records, errors


def lint_claims(pages: Iterable[Any], snippets_by_page: dict[str, list[Any]], records: list[Any]) -> list[Any]:
    """Warnings (Diagnostic) at the front-matter line of every claim its page's evidence does not back."""
    from snippets.diagnostic import Diagnostic

    every = [s for snippets in snippets_by_page.values() for s in snippets]
    facts: dict[str, list[SnippetFacts]] = {}
    for f, s in zip(facts_from_records(every, records), every, strict=True):
        facts.setdefault(s.page_id, []).append(f)
    out = []
    for page in pages:
        for key, why in claim_problems(page.confidence, page.evidence_level, facts.get(page.id, [])):
            out.append(Diagnostic(page.path, page.line_of(key), "warning", f"{key} claims more than the evidence shows: {why}"))
    return out
