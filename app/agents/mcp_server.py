"""The MCP server: search, get_page, get_snippet_evidence and resolve, over stdio or streamable HTTP.

Built with the official `mcp` SDK (`MCPServer`). `kernelwiki mcp` serves it over
stdio; `kernelwiki serve` mounts it at `/mcp` (stateless streamable HTTP with
JSON answers, so any number of service processes can answer). Tools answer in
Markdown. A mistake by the caller (an unknown page, a malformed snippet id, a
section the page does not have) is a tool error whose message says what to do
instead; the server itself never stops on one.
"""

from __future__ import annotations

import contextlib
import html
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.agents.budget import APPROXIMATION, MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, budgeted, render_context
from app.agents.documents import page_document
from app.agents.markdown import UnknownSection, page_url, snippet_line, status_legend
from app.errors import SearchNotReady, error_body
from app.evidence.store import HISTORY_LIMIT, HISTORY_MAX_LIMIT, EvidenceStore, HistoryKey
from app.index.filters import Filters
from app.pages import Pages
from app.search import Searcher
from app.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from sqlalchemy.engine import Engine

MCP_PATH = "/mcp"

INSTRUCTIONS = f"""kernelwiki is a knowledge base of GPU kernel engineering facts for NVIDIA Hopper (SM90) and
Blackwell (SM100): TMA, TMEM, wgmma, tcgen05, mbarrier, thread block clusters, PTX and SASS details,
and the techniques built on them. Its code snippets are compiled with nvcc for the architectures each
page claims and, where they are programs, run on a GPU of that architecture; every snippet carries that
evidence. Consult it before answering from memory, and say how far the evidence goes.

No Blackwell (SM100/SM103) GPU has been available: Blackwell programs were compiled but never run
(their run step is `skipped`). Do not present them as tested on Blackwell hardware.

Evidence statuses:
{status_legend()}
"""

SEARCH_DOC = f"""Search the knowledge base; use it first for any question about Hopper/Blackwell GPU features,
PTX instructions, CUDA intrinsics or kernel techniques instead of answering from memory.

GPU identifiers are words: `cp.async.bulk`, `shared::cluster`, `wgmma.mma_async`, `m16n8k16` all work;
an exact alias, title or page id ranks first; typos are corrected. Without budget_tokens the answer lists
the best sections (page id, section anchor, excerpt); read one with get_page(id, sections=[anchor]).
With budget_tokens the answer is the best sections' full Markdown, whole sections first, until about
that many tokens are used ({APPROXIMATION}), each with the evidence of the code in it: use that to
answer in one call.

arch filters by GPU family (sm90 or sm90a both mean Hopper, sm100 Blackwell); type by page type
(hardware, technique, pattern, api, concept, guide, reference, tool, source). limit: how many results
(default 10; with budget_tokens, how many sections may be considered, default 30)."""

GET_PAGE_DOC = f"""Read a page as Markdown: YAML front matter with its facts (architectures, aliases, confidence,
related pages, evidence counts per target), then the body with hidden setup lines left out and a
`> Evidence` line after each code block saying, per target (sm_90a, sm_100a, ...), what was verified.
Pass sections=[anchor or heading, ...] to read only those sections (each with its subsections): much
shorter than a whole page. Anchors come from search results or from an earlier get_page.

Evidence statuses:
{status_legend()}"""

EVIDENCE_DOC = f"""The verification records of one code snippet, newest first: target, step (compile, ptx,
sass, run), status, GPU, driver, toolchain, time, message and the start of the output. A snippet id is
the page id, a colon and the block's number on the page, e.g. `hw-tma:1`; get_page's Evidence lines
name them. Use it before relying on a snippet's exact behaviour, and when an Evidence line says fail,
stale or skipped, to see why. It answers {HISTORY_LIMIT} records at a time (`limit`, at most
{HISTORY_MAX_LIMIT}); for older ones, call it again with the `next` token the answer ends with.

Evidence statuses:
{status_legend()}"""

RESOLVE_DOC = """Find the page a name belongs to: an alias (e.g. `TMEM`, `UTMALDG`, `cp.async.bulk.tensor`), a title
or a page id, case-insensitive. Use it when you know the exact term; use search for anything else.
Answers with the page id, title, type, architectures and aliases; read it with get_page."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
"""Every tool only reads the local index: safe to call without asking the user."""


def _plain(excerpt_html: str) -> str:
    """A search excerpt (HTML with <mark>) as Markdown: marks become bold, entities plain text."""
    return html.unescape(re.sub(r"</?mark>", "**", excerpt_html)).strip()


class Services(Protocol):
    """The services the tools read (app/store.py's `Store` wires them): pages, search and evidence."""

    pages: Pages
    searcher: Searcher
    evidence: EvidenceStore


def build_server(get_store: Callable[[], Services | None], base_url: str, evidence_dir: Path | None = None) -> MCPServer:
    """The MCP server over the services of the store `get_store()` returns (read at each call: the app sets it at
    start); each tool uses the services it needs (`pages`, `searcher`, `evidence`), as the HTTP routes do. With
    `evidence_dir`, also `get_sass` over its toolchain matrix (app/agents/sass_tool.py)."""
    server: MCPServer = MCPServer(
        "kernelwiki",
        title="kernelwiki: proven GPU kernel facts",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        log_level="WARNING",
    )

    def store() -> Services:
        current = get_store()
        if current is None:
            raise ToolError("the knowledge base is still being indexed; try again in a few seconds")
        return current

    def pages() -> Pages:
        return store().pages

    def searcher() -> Searcher:
        return store().searcher

    def evidence() -> EvidenceStore:
        return store().evidence

    @server.tool(description=SEARCH_DOC, annotations=READ_ONLY)
    def search(
        query: Annotated[str, Field(description="words, identifiers or a question", min_length=1, max_length=2000)],
        arch: Annotated[str | None, Field(description="GPU family: sm90 (Hopper) or sm100 (Blackwell)", max_length=100)] = None,
        type: Annotated[str | None, Field(description="page type, e.g. hardware or technique", max_length=100)] = None,
        technique: Annotated[str | None, Field(description="pages listing this value in `techniques`", max_length=100)] = None,
        hardware_feature: Annotated[
            str | None, Field(description="pages listing this value in `hardware_features`", max_length=100)
        ] = None,
        kernel_type: Annotated[
            str | None, Field(description="pages listing this value in `kernel_types`", max_length=100)
        ] = None,
        language: Annotated[
            str | None, Field(description="pages in this language, e.g. cuda or cute-dsl", max_length=100)
        ] = None,
        limit: Annotated[int | None, Field(description="how many results or candidate sections", ge=1, le=100)] = None,
        budget_tokens: Annotated[
            int | None,
            Field(
                description="answer with whole sections' Markdown up to about this many tokens",
                ge=MIN_BUDGET_TOKENS,
                le=MAX_BUDGET_TOKENS,
            ),
        ] = None,
    ) -> str:
        if not query.strip():
            raise ToolError("query is empty: give words to search for, e.g. 'TMA multicast'")
        search_service, page_service = searcher(), pages()
        filters = Filters(
            type=type or None,
            arch=arch or None,
            technique=technique or None,
            hardware_feature=hardware_feature or None,
            kernel_type=kernel_type or None,
            language=language or None,
        )
        try:  # a worker thread (the SDK runs sync tools so) waits for a due catch-up, boundedly
            search_service.caught_up()
        except SearchNotReady as exc:
            raise ToolError(f"{exc}; try again in a few seconds") from None
        problems = search_service.filter_problems(filters, sync=False)
        if problems:
            raise ToolError("; ".join(p.message for p in problems))
        result = search_service.search(query, filters, limit=limit or (30 if budget_tokens else 10), sync=False)
        head = f'{result.total} results for "{result.query}"'
        if result.did_you_mean:
            head += f" (searched for: {result.did_you_mean})"
        if not result.results:
            return head + ". Try other words, fewer filters, or resolve() for an exact name."
        if budget_tokens:
            context = budgeted(page_service, result, budget_tokens, base_url)
            if not context.sections:
                return f"{head}; not one section fits in {budget_tokens} tokens: raise budget_tokens, or search without it."
            return (
                f"{head}; {len(context.sections)} sections in {context.used_tokens} of {budget_tokens} tokens "
                f"({context.left_out} more did not fit).\n\n{render_context(context)}"
            )
        lines = [head + (f", the first {len(result.results)}:" if result.total > len(result.results) else ":")]
        for n, r in enumerate(result.results, 1):
            where = f"section `{r.section.anchor}` ({r.section.heading})" if r.section else "the page itself"
            archs = ", ".join(r.architectures) or "no architecture"
            lines.append(f"{n}. {r.title}: page `{r.id}`, {where} [{r.type}; {archs}]")
            if r.snippet:
                lines.append(f"   {_plain(r.snippet)}")
        lines.append("\nRead one with get_page(id, sections=[anchor]); search again with budget_tokens for the text itself.")
        return "\n".join(lines)

    @server.tool(description=GET_PAGE_DOC, annotations=READ_ONLY)
    def get_page(
        id: Annotated[
            str, Field(description="page id, e.g. hw-tma (resolve() turns a name into one)", min_length=1, max_length=200)
        ],
        sections: Annotated[
            list[str] | None, Field(description="anchors or headings of the sections to read; all when omitted", max_length=50)
        ] = None,
    ) -> str:
        page_service = pages()
        try:
            text = page_document(page_service, id, base_url, sections or None)
        except UnknownSection as exc:
            raise ToolError(str(exc)) from None
        if text is None:
            found = page_service.resolve(id)
            hint = (
                f" '{id}' is an alias of page '{found}': call get_page('{found}')."
                if found
                else " Use search or resolve to find page ids."
            )
            raise ToolError(f"no page has the id '{id}'.{hint}")
        return text

    @server.tool(description=EVIDENCE_DOC, annotations=READ_ONLY)
    def get_snippet_evidence(
        snippet_id: Annotated[str, Field(description="PAGE_ID:N, e.g. hw-tma:1", min_length=3, max_length=300)],
        limit: Annotated[
            int, Field(description="records in this answer, newest first", ge=1, le=HISTORY_MAX_LIMIT)
        ] = HISTORY_LIMIT,
        next: Annotated[  # noqa: A002 - the token's name in the HTTP API too
            str | None, Field(description="the `next` token of the previous answer, for older records", max_length=2000)
        ] = None,
    ) -> str:
        page_id, sep, number = snippet_id.strip().rpartition(":")
        if not sep or not page_id or not number.isdigit():
            raise ToolError(f"'{snippet_id}' is not a snippet id: write the page id, a colon and the block number, e.g. hw-tma:1")
        try:
            after = HistoryKey.from_token(next.strip()) if next else None
        except ValueError as exc:
            raise ToolError(f"next: {exc}; call without it first, then pass the token each answer ends with") from None
        records = evidence()
        window = records.history(snippet_id.strip(), limit, after)
        if window is None:
            raise ToolError(f"no snippet '{snippet_id}': get_page('{page_id}') names the page's snippets in its Evidence lines")
        with records.engine.connect() as conn:
            current = {x.id: x for x in records.snippets_with_evidence(conn, page_id=page_id)}.get(snippet_id.strip())
        lines = [f"# Evidence for snippet {snippet_id.strip()} (page {page_id})", ""]
        if current is not None and after is None:
            lines += [
                f"Current status: {current.status}; targets: {', '.join(current.targets) or 'none'}.",
                f"Latest per target: {snippet_line(current)}",
                "",
            ]
        if not window.total:
            lines.append("No verification has been recorded for this snippet yet.")
            return "\n".join(lines)
        shown = len(window.records)
        lines += [
            f"{window.total} records, newest first; "
            + (f"{shown} shown here" + (", after the previous answer's" if after is not None else ""))
            + ":",
            "",
        ]
        for r in window.records:
            d = r.data
            where = ", ".join(
                str(x)
                for x in (
                    d.get("gpu_name"),
                    d.get("driver_version") and f"driver {d['driver_version']}",
                    d.get("toolchain"),
                    d.get("host") and f"host {d['host']}",
                )
                if x
            )
            stale = " (STALE: recorded for an earlier version of the code)" if r.stale else ""
            lines.append(
                f"- {r.timestamp} {r.target} {r.step}: **{r.status}**{stale}; {where or 'no machine recorded'}"
                + (f"; {r.message}" if r.message else "")
            )
            output = str(d.get("output") or "").strip()
            if output and r.status not in ("pass", "unverified"):
                lines.append("  output: " + " ⏎ ".join(output.splitlines()[:6])[:600])
        if window.next is not None:
            lines += [
                "",
                f"Older records: call get_snippet_evidence(snippet_id='{snippet_id.strip()}', next='{window.next.token()}').",
            ]
        return "\n".join(lines)

    @server.tool(description=RESOLVE_DOC, annotations=READ_ONLY)
    def resolve(name: Annotated[str, Field(description="an alias, title or page id", min_length=1, max_length=500)]) -> str:
        page_service = pages()
        page_id = page_service.resolve(name)
        page = page_service.get_page(page_id) if page_id else None
        if page is None:
            near = searcher().search(name, Filters(), limit=3).results
            hint = ("; closest search results: " + ", ".join(f"{r.id} ({r.title})" for r in near)) if near else ""
            raise ToolError(f"no page has the alias, title or id '{name}'{hint}")
        meta = page.meta
        return "\n".join(
            [
                f"{page.id}: {page.title}",
                f"type: {page.type}; architectures: {', '.join(meta.get('architectures', [])) or 'none'}",
                f"aliases: {', '.join(meta.get('aliases', [])) or 'none'}",
                f"markdown: {page_url(base_url, page.id)} (or get_page('{page.id}'))",
            ]
        )

    if evidence_dir is not None:
        from app.agents.sass_tool import add_sass_tool
        from app.evidence.artifacts import ArtifactNotFound, MatrixData

        def matrix_engine() -> Engine:
            store = get_store()
            if store is None:
                raise ArtifactNotFound("snippet: the index is not open yet")
            return store.evidence.engine

        add_sass_tool(server, MatrixData(evidence_dir, matrix_engine), READ_ONLY)
    return server


def run_stdio(settings: Settings, prepare: Callable[[], Services]) -> None:
    """Open the index with `prepare()` (index the wiki, load evidence), then serve the tools on stdin/stdout."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the protocol: nothing else may reach it
        store = prepare()
    build_server(lambda: store, settings.server_url, settings.evidence).run("stdio")


class PostOnly:
    """`/mcp` takes POST only: a GET would open a stream on which a stateless server never sends anything.

    The streamable HTTP transport lets a server answer GET with 405 when it
    offers no server-initiated stream; this one has nothing to push.
    """

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "POST":
            detail = f"{MCP_PATH} is an MCP endpoint (streamable HTTP): send JSON-RPC messages with POST"
            response = JSONResponse(error_body(405, detail), status_code=405, headers={"Allow": "POST"})
            await response(scope, receive, send)
            return
        await self.inner(scope, receive, send)


def mount_http(app: FastAPI) -> None:
    """Serve the tools at `/mcp` of `app` (stateless streamable HTTP), its session manager run by the app's lifespan."""
    settings: Settings = app.state.settings
    server = build_server(lambda: getattr(app.state, "store", None), settings.server_url, settings.evidence)
    app.state.mcp_server = server  # more tools may be added: the try tools (app/tryrun/mcp_tools.py)
    server.streamable_http_app(  # makes the session manager; its Starlette app is not used
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=settings.host
    )
    app.router.routes.append(Route(MCP_PATH, endpoint=PostOnly(StreamableHTTPASGIApp(server.session_manager))))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            async with server.session_manager.run():
                yield state

    app.router.lifespan_context = lifespan
