"""The agent documents, read from the pages service (app/pages.py): a page's Markdown, llms.txt and llms-full.txt.

The HTTP routes (app/agents/routes.py) and the MCP tools (app/agents/mcp_server.py)
both answer from these functions, so an agent sees the same text either way.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.agents.markdown import page_markdown, page_url, status_legend
from app.index.markdown import description
from app.index.run_gpus import ran_on_statement
from app.pages import Pages

TITLE = "kernelwiki"
SUMMARY = (
    "GPU kernel engineering facts for NVIDIA Hopper (SM90) and Blackwell (SM100): TMA, TMEM, wgmma, tcgen05, "
    "mbarrier, clusters. Code snippets are verified for the architectures their page claims: compiled with nvcc "
    "(Python byte-compiled; sketches and fragments are not built) and, where a block is a program, run on a GPU "
    "of that architecture when one was available; each snippet carries that evidence."
)
RanOn = tuple[tuple[str, tuple[str, ...]], ...]
"""What ran where (app/index/run_gpus.py `ran_on`): family → GPUs that ran a program of it that passed."""
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


Listed = tuple[bool, int, str, str, str, str, str, str | None]
"""What llms.txt shows of a page, in its sort order: (is a source, the type's rank, type, lower-case title, id,
title, architectures as its front matter lists them ("sm90a, sm100a", "" for none), description as the indexer
stored it: None for a page indexed before migration 0010 and not since).

A plain tuple of strings, which the garbage collector stops tracking: at 10,000 pages a named tuple or a list per
page stayed tracked and set off a full collection (60-90 ms) on the first request after a start or a reindex."""

PAGES_SQL = "SELECT id, title, type, description FROM page"
"""Every page's listed columns in one scan: on SQLite through the covering index `ix_page_summary`
(migration 0014v), so the scan never walks a page's long row (its body) to reach `description`."""
ARCHITECTURES_SQL = "SELECT page_id, arch FROM architecture ORDER BY id"


def _all_pages(pages: Pages) -> list[Listed]:
    """Every page, grouped by type in llms.txt order (sources last), by title within a type.

    Two plain queries on the driver's cursor (pages, then architectures in the order each page declared
    them): no front matter decoded, no page or row object built. At 10,000 pages this is what the first
    request after a start or a reindex pays.
    """
    archs: dict[str, str] = {}
    with pages.connection() as conn:
        cursor = conn.connection.cursor()
        try:
            cursor.execute(ARCHITECTURES_SQL)
            for page_id, arch in cursor.fetchall():
                archs[page_id] = f"{archs[page_id]}, {arch}" if page_id in archs else arch
            cursor.execute(PAGES_SQL)
            rows = cursor.fetchall()
        finally:
            cursor.close()
    order = {t: i for i, t in enumerate(TYPE_HEADINGS)}
    other = len(order)
    listed = [
        (ptype == "source", order.get(ptype, other), ptype, title.lower(), pid, title, archs.get(pid, ""), described)
        for pid, title, ptype, described in rows
    ]
    listed.sort()  # the id (unique) decides before the columns that follow it
    return listed


def _heading(page_type: str) -> str:
    return TYPE_HEADINGS.get(page_type, page_type.replace("-", " ").replace("_", " ").title())


def _descriptions(pages: Pages, listed: list[Listed]) -> dict[str, str]:
    """The descriptions llms.txt works out itself: those of pages indexed before there was a `page.description`
    (migration 0010) and not edited since."""
    missing = [pid for _, _, _, _, pid, _, _, described in listed if described is None]
    bodies = pages.page_sources(missing) if missing else {}
    return {pid: description(bodies.get(pid, ("", 1))[0]) for pid in missing}


LINES_PER_PIECE = 2000
"""llms.txt is produced in pieces of this many lines: at 100,000 pages the whole ~31 MB document as one list of lines,
then one string, then its bytes raised a worker's heap by ~75 MB that it never gave back (measured 2026-12-04)."""


def llms_txt(pages: Pages, base_url: str, ran: RanOn) -> Iterator[str]:
    """The llmstxt.org index: title, summary, what ran where (`ran`, from the evidence held), how to read the
    evidence, then a link per page grouped by type (produced in pieces; joined, they are the document)."""
    base = base_url.rstrip("/")
    lines = [
        f"# {TITLE}",
        "",
        f"> {SUMMARY}",
        "",
        ran_on_statement(ran),
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
    listed = _all_pages(pages)
    worked_out = _descriptions(pages, listed)
    pages_url = page_url(base, "").removesuffix(".md")  # "{base}/pages/": the page's id and ".md" follow
    append = lines.append
    current = None
    for _, _, ptype, _, pid, title, archs, described in listed:
        if ptype != current:
            current = ptype
            lines += ["", f"## {_heading(ptype)}", ""]
        summary = (described if described is not None else worked_out[pid]) or title
        label = title.replace("[", "(").replace("]", ")")
        append(
            f"- [{label}]({pages_url}{pid}.md): {summary} [{archs}]" if archs else f"- [{label}]({pages_url}{pid}.md): {summary}"
        )
        if len(lines) >= LINES_PER_PIECE:
            yield "\n".join(lines) + "\n"
            lines.clear()
    yield "\n".join(lines) + "\n" if lines else ""


def llms_full_txt(pages: Pages, base_url: str, ran: RanOn) -> Iterator[str]:
    """Every page's Markdown, one after another, in llms.txt order (produced page by page), after what ran where."""
    yield f"# {TITLE}\n\n> {SUMMARY}\n\n{ran_on_statement(ran)}\n\nEvidence statuses:\n\n{status_legend()}\n"
    for _, _, _, _, page_id, _, _, _ in _all_pages(pages):
        text = page_document(pages, page_id, base_url)
        if text is not None:
            yield f"\n<!-- page {page_id}: {page_url(base_url, page_id)} -->\n{text}"
