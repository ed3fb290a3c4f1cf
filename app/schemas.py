"""Public shapes the API returns (and the HTML views render); separate from the table models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorPublic(BaseModel):
    """What went wrong: the inside of every 4xx/5xx answer (app/errors.py builds it)."""

    status: int
    title: str
    detail: str | Any = None


class ErrorAnswer(BaseModel):
    """The one error shape: every 4xx/5xx answer is `{"error": {"status", "title", "detail"}}`."""

    error: ErrorPublic


class SectionRef(BaseModel):
    heading: str
    anchor: str


class SearchResult(BaseModel):
    id: str
    title: str
    type: str
    path: str
    architectures: list[str]
    score: float
    section: SectionRef | None
    snippet: str = Field(description="HTML excerpt; matched words in <mark>, everything else escaped")


class ContextSection(BaseModel):
    """One section's Markdown in a token-budgeted search answer (see app/agents/budget.py)."""

    page_id: str
    title: str
    heading: str = Field(description="the section's heading; empty for the text before a page's first heading")
    anchor: str = Field(description="HTML id of the heading on /pages/{page_id}; empty for the page's intro")
    url: str = Field(description="the page's Markdown, /pages/{page_id}.md")
    text: str = Field(description="the section's Markdown, hidden setup lines omitted")
    evidence: str = Field(description="what was verified for the section's snippets, per target")
    tokens: int = Field(description="approximate tokens of this entry: ceil(characters / 4) over heading, text and evidence")
    truncated: bool = Field(description="true when only the start of the section fitted the budget")


class SearchContext(BaseModel):
    """The best sections' text within a token budget: whole sections first, then the start of the next best."""

    budget_tokens: int
    used_tokens: int
    approximation: str = Field(description="how tokens are counted")
    sections: list[ContextSection]
    left_out: int = Field(description="matching sections that did not fit the budget")


class SearchPublic(BaseModel):
    query: str
    total: int
    limit: int
    offset: int
    next: str | None = Field(default=None, description="query string of the next page of results, or null")
    results: list[SearchResult]
    facets: dict[str, dict[str, int]] = Field(
        description="hit counts per value of each facet named in `facets=` (type, arch, tag); empty unless asked"
    )
    did_you_mean: str | None = None
    took_ms: float
    context: SearchContext | None = Field(
        default=None, description="with budget_tokens: the best sections' Markdown within the budget"
    )


class PageSummary(BaseModel):
    id: str
    title: str
    type: str
    path: str
    architectures: list[str]
    tags: list[str]
    confidence: str | None = None


class PageList(BaseModel):
    total: int
    limit: int
    offset: int | None = Field(description="where this window starts; null for a window after a `next` token")
    next: str | None = Field(default=None, description="query string of the next window (with a `next` token), or null")
    pages: list[PageSummary]
    facets: dict[str, dict[str, int]] = {}


class LinkPublic(BaseModel):
    id: str
    title: str | None = None
    resolved: bool
    type: str | None = None
    url: str | None = None


class SectionPublic(BaseModel):
    level: int
    heading: str
    anchor: str
    line: int


class EvidencePublic(BaseModel):
    """One verification record, with whether it still matches the snippet's content."""

    record_id: str
    snippet_id: str
    target: str
    step: str
    status: str
    stale: bool = Field(description="true when the record was made for other snippet content")
    message: str | None = None
    timestamp: str
    data: dict[str, Any]
    warnings: list[str] = Field(
        default_factory=list,
        description="compiler messages that change what a pass means (an instruction ignored, performance lost)",
    )


class EvidenceList(BaseModel):
    """One window of `GET /api/snippets/{id}/evidence`: records newest first, paged by key in SQL; `total` is exact."""

    snippet_id: str
    total: int
    limit: int
    next: str | None = Field(default=None, description="query string of the next window (`limit=…&next=TOKEN`), or null")
    records: list[EvidencePublic]


class SnippetPublic(BaseModel):
    id: str
    page_id: str
    position: int
    line: int
    lang: str
    mode: str
    targets: list[str]
    content_hash: str
    info: str | None = None
    source: str | None = None
    status: str = Field(
        description="overall, over the declared targets (runner/status.py): pass (every target passed every step its "
        "mode needs), xfail, partial (verified on some targets only), fail, error, timeout, stale, skipped, unverified "
        "(sketches, fragments), syntax-ok (Python only byte-compiled), unknown"
    )
    summary: str = Field(
        default="", description="what holds, in words, e.g. 'ran on sm_90a · compiled for sm_100a, no SM100 GPU'"
    )
    target_status: dict[str, str] = Field(default_factory=dict, description="status of each declared target")
    warnings: list[str] = Field(
        default_factory=list,
        description="compiler warnings of passing records that limit what the pass proves, with their targets",
    )
    evidence: dict[str, list[EvidencePublic]] = Field(default_factory=dict, description="latest record per step for each target")


class SnippetList(BaseModel):
    """One window of `GET /api/snippets`, paged in SQL; `total` is exact."""

    total: int
    limit: int
    offset: int | None = Field(description="where this window starts; null for a window after a `next` token")
    next: str | None = Field(default=None, description="query string of the next window (with a `next` token), or null")
    snippets: list[SnippetPublic]


class PagePublic(BaseModel):
    id: str
    title: str
    type: str
    path: str = Field(description="the page's file relative to the wiki root (`--wiki`)")
    file: str = Field(
        description="the page's file as its repository names it: the path itself under a KernelWiki repository root "
        "(`wiki/hardware/tma.md`), the folder's name and the path for a plain folder of pages (kernelwiki's `wiki/`)",
    )
    meta: dict[str, Any] = Field(description="every front-matter field, unknown keys included")
    html: str = Field(description="the body rendered to safe HTML (raw HTML escaped, unsafe link schemes refused)")
    toc: list[dict[str, Any]]
    sections: list[SectionPublic]
    related: list[LinkPublic]
    sources: list[LinkPublic]
    backlinks: list[LinkPublic]
    snippets: list[SnippetPublic]
    evidence_summary: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per declared target: how many snippets have each status there ('*': sketches and invalid blocks)",
    )
    evidence_text: str = Field(default="", description="what the page's code was proven to do, per target, in words")
    claim_problems: list[str] = Field(
        default_factory=list,
        description="where confidence/evidence_level claims more than the snippets' evidence shows (app/evidence/claims.py)",
    )
    performance_claims: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the page's performance_claims, one object per claim (gpu, dtype, shape, metric, value, …; app/index/perf.py) with state, display and measurement (value, ci, unit, gpu, date, clocks, snippet_id, within_tolerance; app/evidence/measured_claims.py)",
    )
    problems: list[dict[str, Any]] = Field(
        default_factory=list,
        description="what indexing found in the page's file, as {line, severity, message}: its schema and vocabulary "
        "findings (data/schemas.yaml, data/tags.yaml or the built-in schema) and parse warnings; the page is served as it is",
    )
