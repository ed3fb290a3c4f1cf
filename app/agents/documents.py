"""The agent documents, read from the pages service (app/pages.py): a page's Markdown, llms.txt and llms-full.txt.

The HTTP routes (app/agents/routes.py) and the MCP tools (app/agents/mcp_server.py)
both answer from these functions, so an agent sees the same text either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from sqlalchemy import text

from app.agents.markdown import page_markdown, page_url, status_legend
from app.index.markdown import description
from app.pages import Pages

TITLE = "kernelwiki"
SUMMARY = (
    "GPU kernel engineering facts for NVIDIA Hopper (SM90) and Blackwell (SM100): TMA, TMEM, wgmma, tcgen05, "
    "mbarrier, clusters. Every code snippet is compiled with nvcc for the architectures its page claims and, "
    "where it is a program, run on a GPU of that architecture when one was available; each snippet carries "
    "that evidence."
)
NO_BLACKWELL = (
    "No Blackwell (SM100/SM103) GPU has been available: Blackwell programs are compiled but have never run, "
    "and their evidence says so (run step `skipped`). Programs for SM90 ran on an NVIDIA H200."
)
TYPE_HEADINGS = {
    "hardware": "Hardware",
    "technique": "Techniques",
    "pattern": "Patterns",
    "api": "APIs",
    "concept": "Concepts",
    "guide": "Guides",
    "reference": "Reference",
    "tool": "Tools",
    "source": "Sources",
}
"""Section heading per page type, in llms.txt order; other types follow, titled, before the sources."""


def page_document(pages: Pages, page_id: str, base_url: str, sections: list[str] | None = None) -> str | None:
    """A page's Markdown (or the named sections'), with facts and evidence; None when there is no such page.

    Raises `app.agents.markdown.UnknownSection` for a section name the page does not have.
    """
    page = pages.get_page(page_id)
    source = pages.page_sources([page_id]).get(page_id) if page is not None else None
    if page is None or source is None:
        return None
    return page_markdown(page, source[0], source[1], base_url, sections)


class Listed(NamedTuple):
    """What llms.txt shows of a page besides its description."""

    id: str
    title: str
    type: str
    architectures: list[str]  # as its front matter lists them


def _all_pages(pages: Pages) -> list[Listed]:
    """Every page, grouped by type in llms.txt order (sources last), by title within a type.

    Two plain queries (pages, then architectures in the order each page declared them), no front matter
    decoded: at 10,000 pages this is what the first request after a reindex pays.
    """
    with pages.connection() as conn:
        archs: dict[str, list[str]] = {}
        for page_id, arch in conn.execute(text("SELECT page_id, arch FROM architecture ORDER BY id")):
            archs.setdefault(page_id, []).append(arch)
        listed = [Listed(r[0], r[1], r[2], archs.get(r[0], [])) for r in conn.execute(text("SELECT id, title, type FROM page"))]
    order = list(TYPE_HEADINGS)
    rank = lambda p: (p.type == "source", order.index(p.type) if p.type in order else len(order), p.type, p.title.lower(), p.id)  # noqa: E731
    return sorted(listed, key=rank)


def _heading(page_type: str) -> str:
    return TYPE_HEADINGS.get(page_type, page_type.replace("-", " ").replace("_", " ").title())


def _descriptions(pages: Pages) -> dict[str, str]:
    """Every page's description as the indexer stored it; worked out here only for pages indexed before
    there was a `page.description` (migration 0010) and not edited since."""
    with pages.connection() as conn:
        found: dict[str, str | None] = dict(conn.execute(text("SELECT id, description FROM page")).all())
    missing = [pid for pid, d in found.items() if d is None]
    bodies = pages.page_sources(missing) if missing else {}
    return {pid: d if d is not None else description(bodies.get(pid, ("", 1))[0]) for pid, d in found.items()}


def llms_txt(pages: Pages, base_url: str) -> str:
    """The llmstxt.org index: title, summary, how to read the evidence, then a link per page grouped by type."""
    base = base_url.rstrip("/")
    listed = _all_pages(pages)
    described = _descriptions(pages)
    lines = [
        f"# {TITLE}",
        "",
        f"> {SUMMARY}",
        "",
        NO_BLACKWELL,
        "",
        "Each link below is a page's Markdown: YAML front matter with its facts (architectures, aliases, "
        "confidence, evidence counts per target), then the body, with hidden setup lines left out and an "
        "`> Evidence` line after every code block. What the evidence statuses mean:",
        "",
        status_legend(),
        "",
        f"All pages in one file: {base}/llms-full.txt. Search answering with the best sections' text within a "
        f"token budget: {base}/api/search?q=TMA+multicast&budget_tokens=2000. "
        f"MCP server (streamable HTTP): {base}/mcp.",
    ]
    current = None
    for page in listed:
        if page.type != current:
            current = page.type
            lines += ["", f"## {_heading(page.type)}", ""]
        summary = described.get(page.id) or page.title
        archs = f" [{', '.join(page.architectures)}]" if page.architectures else ""
        label = page.title.replace("[", "(").replace("]", ")")
        lines.append(f"- [{label}]({page_url(base, page.id)}): {summary}{archs}")
    return "\n".join(lines) + "\n"


def llms_full_txt(pages: Pages, base_url: str) -> Iterator[str]:
    """Every page's Markdown, one after another, in llms.txt order (produced page by page)."""
    yield f"# {TITLE}\n\n> {SUMMARY}\n\n{NO_BLACKWELL}\n\nEvidence statuses:\n\n{status_legend()}\n"
    for page in _all_pages(pages):
        text = page_document(pages, page.id, base_url)
        if text is not None:
            yield f"\n<!-- page {page.id}: {page_url(base_url, page.id)} -->\n{text}"
