"""Token-budgeted search answers: the best sections' Markdown until the budget is spent.

Given search results (best first) and a budget in tokens, the answer holds
whole sections first, in rank order, skipping any that no longer fit; then, if
enough budget is left, the start of the best section that did not fit, cut at
a line and marked `truncated`. Each entry carries its page id, anchor and the
evidence of the snippets in it, and its cost counts all three.

Tokens are approximated as ceil(characters / 4): close to what BPE tokenizers
give for English prose and code (they vary by model, typically 3 to 5
characters per token), cheap, and the same on every backend. Nothing here
knows how search ranks; it reads the ranked `SearchPublic` and each page's
Markdown through `Pages.page_sources` (app/pages.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from app.agents.markdown import PageText, evidence_summary, page_url, prepare
from app.pages import Pages
from app.schemas import ContextSection, SearchContext, SearchPublic

CHARS_PER_TOKEN = 4
APPROXIMATION = "ceil(characters / 4) of each entry as rendered: its heading line, evidence and Markdown"
MIN_BUDGET_TOKENS = 50
MAX_BUDGET_TOKENS = 100_000
"""Bounds of `budget_tokens` (API and MCP): below, no section fits; above, the answer is no longer an answer."""
MIN_PARTIAL_TOKENS = 48
"""A cut section is added only when at least this much budget is left for it (less says too little)."""
SEPARATOR = "\n\n"
"""Between entries; counted with each entry, so a rendered answer never costs more than `used_tokens`."""
TRUNCATED = "\n[… section continues: get_page for the rest]"


def approx_tokens(text: str) -> int:
    """Approximate token count: ceil(len(text) / 4)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def header(title: str, heading: str, page_id: str, anchor: str) -> str:
    """An entry's heading line: page title › section heading (page_id#anchor)."""
    where = f"{page_id}#{anchor}" if anchor else page_id
    return f"{title} › {heading} ({where})" if heading else f"{title} ({where})"


def entry_markdown(head: str, evidence: str, text: str) -> str:
    """One entry as it is shown (and counted): heading line, evidence, then the section's Markdown."""
    return f"## {head}\nEvidence: {evidence}\n\n{text}"


@dataclass
class Candidate:
    """One ranked section with everything needed to price and show it."""

    page_id: str
    title: str
    heading: str
    anchor: str
    text: str
    evidence: str

    def cost(self, text: str) -> int:
        head = header(self.title, self.heading, self.page_id, self.anchor)
        return approx_tokens(entry_markdown(head, self.evidence, text) + SEPARATOR)


def _candidates(pages: Pages, result: SearchPublic, conn: Connection) -> list[Candidate]:
    """The results' sections in rank order, each once, with their Markdown and evidence."""
    page_ids = list(dict.fromkeys(r.id for r in result.results))
    sources = pages.page_sources(page_ids, conn)
    prepared: dict[str, PageText] = {}
    snippets = {pid: pages.evidence.snippets_with_evidence(conn, page_id=pid) for pid in page_ids if pid in sources}
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    for r in result.results:
        if r.id not in sources:
            continue
        if r.id not in prepared:
            body, body_line = sources[r.id]
            prepared[r.id] = prepare(body, body_line, snippets.get(r.id, []))
        page = prepared[r.id]
        span = page.span(r.section.anchor) if r.section is not None else None
        if span is None:  # a page matched by title, alias or tag: its first section
            span = next((s for s in page.spans if page.text(s.start, s.end, with_evidence=False)), None)
        if span is None or (r.id, span.anchor) in seen:
            continue
        seen.add((r.id, span.anchor))
        out.append(
            Candidate(
                page_id=r.id,
                title=r.title,
                heading=span.heading,
                anchor=span.anchor,
                text=page.text(span.start, span.end, with_evidence=False),
                evidence=evidence_summary(page.snippets_in(span.start, span.end)),
            )
        )
    return out


def _cut(candidate: Candidate, tokens: int) -> str | None:
    """The longest start of a section, cut at a line, whose entry costs at most `tokens`; None if too little fits."""
    room = (tokens - candidate.cost("")) * CHARS_PER_TOKEN - len(TRUNCATED) - len("\n```")
    kept: list[str] = []
    used = 0
    for line in candidate.text.split("\n"):
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    if not any(line.strip() and not line.startswith("#") for line in kept):
        return None  # a heading alone says nothing
    if sum(1 for line in kept if line.lstrip().startswith(("```", "~~~"))) % 2:
        kept.append("```")  # close a code block the cut left open
    return "\n".join(kept) + TRUNCATED


def budgeted(
    pages: Pages, result: SearchPublic, budget_tokens: int, base_url: str, conn: Connection | None = None
) -> SearchContext:
    """The best sections of `result` within `budget_tokens`: whole ones first, then the start of the next best.

    `conn` is the request's connection where it has one (a request never holds two).
    """
    if conn is None:
        with pages.connection() as own:
            return budgeted(pages, result, budget_tokens, base_url, own)
    candidates = _candidates(pages, result, conn)
    left = budget_tokens
    chosen: dict[int, ContextSection] = {}

    def entry(c: Candidate, text: str, truncated: bool) -> ContextSection:
        return ContextSection(
            page_id=c.page_id,
            title=c.title,
            heading=c.heading,
            anchor=c.anchor,
            url=page_url(base_url, c.page_id),
            text=text,
            evidence=c.evidence,
            tokens=c.cost(text),
            truncated=truncated,
        )

    for i, c in enumerate(candidates):
        cost = c.cost(c.text)
        if cost <= left:
            chosen[i] = entry(c, c.text, False)
            left -= cost
    if left >= MIN_PARTIAL_TOKENS:
        for i, c in enumerate(candidates):
            if i in chosen:
                continue
            text = _cut(c, left)
            if text is not None:
                chosen[i] = entry(c, text, True)
                left -= chosen[i].tokens
            break
    sections = [chosen[i] for i in sorted(chosen)]
    return SearchContext(
        budget_tokens=budget_tokens,
        used_tokens=budget_tokens - left,
        approximation=APPROXIMATION,
        sections=sections,
        left_out=len(candidates) - len(sections),
    )


def render_context(context: SearchContext) -> str:
    """A budgeted answer as Markdown, one `##` entry per section, exactly as counted (what the MCP search tool shows)."""
    return SEPARATOR.join(
        entry_markdown(header(s.title, s.heading, s.page_id, s.anchor), s.evidence, s.text) for s in context.sections
    )
