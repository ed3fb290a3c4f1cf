"""A page as Markdown for agents: front matter facts, hidden setup lines left out, evidence after each snippet.

The body is the page's own Markdown. Lines a snippet marks hidden (`//! ` in
cuda/cpp/ptx blocks, `#! ` in python blocks; docs/snippets.md) are compiled but
never shown, so they are left out here as on the HTML page. After each verified
block comes one `> Evidence …` line saying, per target, what was proven.
Sections are the same headings and anchors the index and the HTML page use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from markdown_it import MarkdownIt

from app.index.markdown import render
from app.index.perf import CLAIM_FIELDS
from app.schemas import PagePublic, SnippetPublic
from app.web.badges import snippet_evidence
from snippets.attributes import language_of
from snippets.extract import split_hidden

STATUS_MEANING = {
    "pass": "verified: compiled for that target and, where the block is a program, ran on a GPU of that "
    "architecture and checked its own result",
    "fail": "compiled or ran and went wrong on that target: do not trust the snippet there",
    "xfail": "a deliberately wrong example that fails to compile, exactly as the page says it should",
    "unverified": "a sketch or excerpt (a fragment: not a complete program) that is never compiled, or code that could "
    "not be forced through ptxas: treat it as unproven",
    "syntax-ok": "Python that was only byte-compiled (its syntax is valid); it never ran: treat it as unproven",
    "skipped": "a step that was not done, chiefly running on SM100/SM103 (Blackwell): no Blackwell GPU has been "
    "available, so those programs were compiled but have never run",
    "stale": "the evidence is for an earlier version of the snippet; the current code is unverified",
    "error/timeout": "the verification itself broke or ran out of time; nothing is proven",
    "unknown": "no verification has been recorded yet",
}
"""What each evidence status means, written for a reader who must decide how far to trust a snippet."""

NEVER_RUN = "never run: no GPU of this architecture was available, so compiling is all the evidence"


def status_legend() -> str:
    """The statuses and their meanings as a Markdown list."""
    return "\n".join(f"- `{status}`: {meaning}" for status, meaning in STATUS_MEANING.items())


def snippet_line(snippet: SnippetPublic) -> str:
    """One line of evidence for a snippet: per target, what each step proved (or that it never ran)."""
    panel = snippet_evidence(snippet)
    head = f"{snippet.id} ({snippet.lang}, {snippet.mode})"
    if panel.note is not None:
        return f"{head}: {panel.note.symbol} {panel.note.text}"
    parts = []
    for target in panel.targets:
        if not target.records:
            parts.append(f"{target.target}: not yet verified")
            continue
        words = "; ".join(f"{b.symbol} {b.text}" for b in target.badges)
        if any(r.step == "run" and r.status == "skipped" and not r.stale for r in target.records):
            words += f" ({NEVER_RUN})"
        parts.append(f"{target.target}: {words}")
    return f"{head}: " + (" · ".join(parts) if parts else "no target to verify")


def evidence_summary(snippets: Iterable[SnippetPublic]) -> str:
    """The evidence lines of several snippets, or a note that there are none."""
    lines = [snippet_line(s) for s in snippets]
    return "\n".join(lines) if lines else "no code blocks here"


@dataclass
class Span:
    """A section of the body: its heading and the body lines [start, end) it covers (0-based, end exclusive)."""

    heading: str
    anchor: str  # "" for the text before the first heading
    level: int  # 0 for that intro
    start: int
    end: int


@dataclass
class PageText:
    """A page body ready for agents: which lines to leave out and what to add after which line."""

    lines: list[str]
    body_line: int  # file line of lines[0]
    spans: list[Span]
    dropped: set[int] = field(default_factory=set)  # hidden setup lines
    evidence_after: dict[int, str] = field(default_factory=dict)  # closing fence line → evidence line
    snippet_at: dict[int, SnippetPublic] = field(default_factory=dict)  # opening fence line → its snippet

    def text(self, start: int, end: int, with_evidence: bool = True) -> str:
        """Body lines [start, end) as Markdown, hidden lines left out, evidence lines added."""
        out: list[str] = []
        for i in range(start, min(end, len(self.lines))):
            if i in self.dropped:
                continue
            out.append(self.lines[i])
            if with_evidence and i in self.evidence_after:
                out += ["", self.evidence_after[i]]
        return "\n".join(out).strip("\n")

    def span(self, name: str) -> Span | None:
        """A section by its anchor, or by its heading (case-insensitive)."""
        wanted = name.strip().lstrip("#").strip()
        for span in self.spans:
            if span.anchor and span.anchor == wanted:
                return span
        for span in self.spans:
            if span.heading and span.heading.lower() == wanted.lower():
                return span
        return None

    def with_subsections(self, span: Span) -> tuple[int, int]:
        """The lines of a section together with the subsections under it."""
        end = len(self.lines)
        after = self.spans[self.spans.index(span) + 1 :]
        for other in after:
            if span.level and other.level <= span.level:
                end = other.start
                break
        return span.start, end

    def snippets_in(self, start: int, end: int) -> list[SnippetPublic]:
        """The snippets whose opening fence lies in body lines [start, end)."""
        return [s for line, s in sorted(self.snippet_at.items()) if start <= line < end]


def prepare(body: str, body_line: int, snippets: list[SnippetPublic]) -> PageText:
    """Parse a body once: its sections, its hidden setup lines, and where each snippet's evidence goes."""
    lines = body.split("\n")
    rendered = render(body)
    spans: list[Span] = []
    for i, section in enumerate(rendered.sections):
        start = 0 if section.level == 0 else section.line - 1
        end = rendered.sections[i + 1].line - 1 if i + 1 < len(rendered.sections) else len(lines)
        spans.append(Span(section.heading, section.anchor, section.level, start, end))
    page = PageText(lines, body_line, spans)
    by_line = {s.line: s for s in snippets}
    for token in MarkdownIt("commonmark").parse(body):
        if token.type != "fence" or token.map is None:
            continue
        lang, _, _ = language_of(token.info)
        if lang is None:
            continue
        _, _, hidden = split_hidden(lang, token.content, 0)
        page.dropped |= {token.map[0] + 1 + offset for offset in hidden}
        snippet = by_line.get(body_line + token.map[0])
        if snippet is not None:
            page.snippet_at[token.map[0]] = snippet
            page.evidence_after[token.map[1] - 1] = "> Evidence " + snippet_line(snippet)
    return page


class UnknownSection(ValueError):
    """A section name that is neither an anchor nor a heading of the page."""


def page_url(base_url: str, page_id: str) -> str:
    return f"{base_url.rstrip('/')}/pages/{page_id}.md"


def evidence_counts(summary: dict[str, dict[str, int]]) -> dict[str, str]:
    """`{"sm_90a": {"pass": 3}}` → `{"sm_90a": "3 pass"}` (per target: snippets by status; `*` is the sketches)."""
    named = {("sketches" if t == "*" else t): c for t, c in summary.items()}
    return {t: ", ".join(f"{n} {s}" for s, n in sorted(c.items())) for t, c in sorted(named.items())}


class _FactsDumper(yaml.SafeDumper):
    """Block-style mappings with flow-style lists (`aliases: [TMA, UTMALDG]`): compact and still plain YAML."""


_FactsDumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def front_matter(page: PagePublic, base_url: str) -> str:
    """The page's facts as YAML front matter: what it is, what it claims, what was verified."""
    meta = page.meta
    facts: dict[str, Any] = {"id": page.id, "title": page.title, "type": page.type}
    for key in ("architectures", "aliases", "tags", "languages", "confidence", "evidence_level", "related", "sources"):
        value = meta.get(key)
        if value not in (None, [], ""):
            facts[key] = value
    if isinstance(meta.get("url"), str):
        facts["url"] = meta["url"]
    facts["markdown"] = page_url(base_url, page.id)
    facts["file"] = page.file  # app/index/lookup.py RepositoryFiles: the path in the wiki's repository
    if page.evidence_summary:
        facts["evidence"] = evidence_counts(page.evidence_summary)
    if isinstance(meta.get("reproducibility"), str):
        facts["reproducibility"] = meta["reproducibility"]
    if (
        page.performance_claims
    ):  # app/index/perf.py + app.evidence.measured_claims.with_measurements: the claim and its measurement
        facts["performance_claims"] = [
            {
                k: c[k]
                for k in (
                    *CLAIM_FIELDS,
                    "value_as_written",
                    "measured_by",
                    "metric_key",
                    "tolerance",
                    "state",
                    "display",
                    "measurement",
                )
                if c.get(k) is not None
            }
            for c in page.performance_claims
        ]
    dumped = yaml.dump(facts, Dumper=_FactsDumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100_000)
    return f"---\n{dumped}---\n"


def page_markdown(page: PagePublic, body: str, body_line: int, base_url: str, sections: list[str] | None = None) -> str:
    """The page (or the named sections with their subsections) as Markdown with its facts and evidence."""
    text = prepare(body, body_line, page.snippets)
    if not sections:
        return front_matter(page, base_url) + "\n" + text.text(0, len(text.lines)) + "\n"
    parts: list[str] = []
    for name in sections:
        span = text.span(name)
        if span is None:
            known = ", ".join(s.anchor for s in text.spans if s.anchor) or "none"
            raise UnknownSection(f"page '{page.id}' has no section '{name}'; its section anchors: {known}")
        start, end = text.with_subsections(span)
        parts.append(text.text(start, end))
    return front_matter(page, base_url) + "\n" + "\n\n".join(parts) + "\n"
