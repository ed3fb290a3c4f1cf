"""`reproducibility` (concept → pseudocode → snippet → runnable → benchmarked) checked against the page's blocks and evidence.

A KernelWiki page states how far a reader can reproduce it. Like `confidence`
(app/evidence/claims.py), the claim may not exceed what kernelwiki found: lint warns at
the field's line when

* `snippet` or above: the page has no fenced code block at all. KernelWiki's references/schema.md defines
  `snippet` as "fenced code or logical-reference fragment" that "the validator does not compile", so any fenced
  block counts, in any language (a ```bash block does; kernelwiki need not be able to compile it). A
  logical-reference fragment without a fence cannot be told from prose: the warning says there is no fenced block;
* `runnable` or above: no block of the page is a program that ran and passed on a declared target (when no block
  is in a language kernelwiki builds, the warning names the languages it found);
* `benchmarked`: additionally, no such run reported a measured quantity (time, rate or cycles)
  and the page states no performance_claims.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.evidence.claims import SnippetFacts, facts_from_records, measures
from snippets.attributes import LANGUAGES
from snippets.diagnostic import Diagnostic
from snippets.extract import fence_words

LEVELS = ("concept", "pseudocode", "snippet", "runnable", "benchmarked")
"""The format's levels, lowest first (a repository's data/tags.yaml lists the same)."""

BUILT_LANGUAGES = ", ".join(dict.fromkeys(LANGUAGES.values()))
"""The languages kernelwiki compiles or runs, for messages ("cuda, cpp, ptx, python")."""


def reproducibility_problem(
    level: str, snippets: list[Any], facts: list[SnippetFacts], has_claims: bool, fences: list[str] | None = None
) -> str | None:
    """Why `level` claims more than the page shows, or None. `snippets` are the blocks kernelwiki verifies; `fences`
    the language word of every fenced block of the page (`snippets.extract.fence_words`; needed only when there
    are no snippets: any snippet is a fenced block)."""
    if level not in LEVELS or LEVELS.index(level) < LEVELS.index("snippet"):
        return None
    fences = fences or []
    if not snippets and not fences:
        return f"'{level}', but the page has no fenced code block"
    if LEVELS.index(level) < LEVELS.index("runnable"):
        return None  # KernelWiki's `snippet`: fenced code in any language, never compiled by its validator
    if not snippets:
        found = ", ".join(sorted({w or "a block without a language" for w in fences}))
        return f"'{level}', but the page has no code block in a language kernelwiki builds or runs ({BUILT_LANGUAGES}; found: {found})"
    ran = [f for f in facts if f.mode == "run" and any(status == "pass" for status in f.target_status.values())]
    if not ran:
        programs = sum(1 for s in snippets if s.mode == "run")
        what = f"{programs} program(s), none ran and passed" if programs else "no block is a program (none defines main)"
        return f"'{level}', but {what} on a declared target"
    if level == "benchmarked" and not has_claims and not any(measures(out) for f in ran for out in f.run_outputs):
        return "'benchmarked', but no run reported a measured time, rate or cycle count and the page states no performance_claims"
    return None


def lint_reproducibility(pages: Iterable[Any], snippets_by_page: dict[str, list[Any]], records: list[Any]) -> list[Diagnostic]:
    """Warnings at the `reproducibility` line of every page whose blocks and evidence do not back it."""
    every = [s for snippets in snippets_by_page.values() for s in snippets]
    facts: dict[str, list[SnippetFacts]] = {}
    for f, s in zip(facts_from_records(every, records), every, strict=True):
        facts.setdefault(s.page_id, []).append(f)
    out: list[Diagnostic] = []
    for page in pages:
        level = page.front.get("reproducibility")
        if not isinstance(level, str):
            continue
        snippets = snippets_by_page.get(page.id, [])
        problem = reproducibility_problem(
            level,
            snippets,
            facts.get(page.id, []),
            bool(page.front.get("performance_claims")),
            fence_words(page.body) if not snippets else None,  # parsed again only for a page with no snippet
        )
        if problem:
            out.append(
                Diagnostic(
                    page.path,
                    page.line_of("reproducibility"),
                    "warning",
                    f"reproducibility claims more than the page shows: {problem}",
                )
            )
    return out
