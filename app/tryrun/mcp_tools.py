"""The MCP tools `compile_snippet` and `run_snippet`: a try run for an agent, with the same rules as `POST /api/try`.

Added to the service's /mcp endpoint when try runs are on (off, the tools are not listed). The token is the
`token` argument or the HTTP `Authorization: Bearer` header of the MCP request. Each answer says what the
result proves and what it does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from app.tryrun.pool import PoolFull
from app.tryrun.service import QuotaExceeded, TryService
from app.tryrun.stream import wait_done_blocking
from app.tryrun.tokens import Refused
from app.tryrun.work.unit import Invalid, TryIn, build_unit

PROVES = """What a pass proves: it compiled for each target (sm_XX) with the nvcc version the answer names, inside
the same sandbox and with the same checks (sass=/ptx= patterns, output=) as the wiki's own snippets; for
run_snippet, that the program ran on the GPU the answer names (an H200, compute capability 9.0, where one
is present) and its own check passed (exit status 0).
What it does not prove: it is not page evidence and never changes a page's status; it makes no performance
claim (one run, no measurement protocol); nothing runs on Blackwell: there is no SM100 GPU, so sm_100a
programs are compiled only and their run step is `skipped`. Where the server has no GPU at all, every run
step is skipped and the answer says so."""

COMPILE_DOC = f"""Compile a CUDA, C++, PTX or Python block with kernelwiki's runner (nvcc in its sandbox), as a page's
snippet would be, and answer with the build log, ptxas resources (registers, shared memory, spills), the check
results and the normalised SASS. Programs are not run (run_snippet runs them). Needs an API token (`token`, or
the MCP request's Authorization header) unless the operator allows anonymous compiles; counts against the
token's hourly quota, except when the same content was tried before (then the stored result answers).
attributes: the fence attributes after the language word, as on a page, e.g. `sass="UTMALDG"` or
`flags="-O3 -DTILE=128"`; targets: e.g. ["sm_90a"].

{PROVES}"""

RUN_DOC = f"""Compile and run a program (a block with main(); mode run) with kernelwiki's runner: built with nvcc in
its sandbox, then run there on a GPU of the target's architecture, with the block's timeout= (at most the
server's try limit). Answers with the build log, the program's output, its exit status, the GPU, and any
metrics its harness reported. Needs an API token (`token`, or the MCP request's Authorization header); counts
against the token's hourly runs and daily GPU seconds.

{PROVES}"""

TRY_TOOL = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
"""The tools change nothing the wiki shows, and the same content answers the same stored result."""

Source = Annotated[str, Field(description="the code, as a fenced block's content", min_length=1, max_length=1_000_000)]
Lang = Annotated[str, Field(description="cuda, cpp, ptx or python", max_length=20)]
Targets = Annotated[list[str], Field(description='e.g. ["sm_90a"] (`any` for cpp/python)', max_length=32)]
Attrs = Annotated[str, Field(description='fence attributes after the language word, e.g. sass="UTMALDG"', max_length=4000)]
Token = Annotated[str | None, Field(description="API token (else the Authorization header is used)", max_length=200)]
SnippetId = Annotated[str | None, Field(description="the page snippet this started from (PAGE_ID:N)", max_length=300)]


OUTPUT_CHARS = 4000
SASS_CHARS = 12000


def _summary(run: dict[str, Any], cached: bool) -> str:
    result = run.get("result") or {}
    lines = [
        f"# Try run {run['id']}: {result.get('status', run.get('status'))}"
        + (" (stored result of the same content)" if cached else ""),
        "",
        f"Share: {run['url']} · JSON: /api/try/{run['id']}",
        f"Toolchain: nvcc {(result.get('toolchain') or {}).get('nvcc_version') or '?'}; sandbox: {result.get('isolation') or 'none started'}",
    ]
    if result.get("compile_only"):
        lines.append(f"Compile-only: {result['compile_only']}")
    if result.get("fault"):
        lines.append(f"Not run: {result['fault']} (ask again to retry)")
    for r in result.get("records", []):
        where = f" on {r['gpu_name']} (cc {r.get('compute_capability')})" if r.get("gpu_name") else ""
        lines.append(f"- {r['target']} {r['step']}: **{r['status']}**{where}" + (f": {r['message']}" if r.get("message") else ""))
        res = r.get("resources") or {}
        if r["step"] == "compile" and res:
            shown = {k: v for k, v in res.items() if k in ("registers", "smem_bytes", "spill_store_bytes", "spill_load_bytes")}
            if shown:
                lines.append("  ptxas: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
        for check in r.get("checks") or []:
            lines.append(
                f"  check {check.get('kind')} `{check.get('pattern')}`: {'ok' if check.get('ok') else 'FAILED'} ({check.get('detail')})"
            )
        if r.get("metrics"):
            lines.append(f"  metrics: {r['metrics']}")
        output = str(r.get("output") or "").strip()
        if output and (r["step"] == "run" or r["status"] not in ("pass", "skipped")):
            lines += [f"  output ({r['step']}):", "```", output[:OUTPUT_CHARS], "```"]
    for target, text in (result.get("sass") or {}).items():
        cut = f"\n// [cut at {SASS_CHARS} characters; the share page has it all]" if len(text) > SASS_CHARS else ""
        lines += [f"SASS for {target}:", "```sass", text[:SASS_CHARS] + cut, "```"]
    lines += ["", str(result.get("not_evidence") or "")]
    return "\n".join(lines)


def add_try_tools(server: MCPServer, get_service: Callable[[], TryService | None]) -> None:
    """Register compile_snippet and run_snippet on `server`."""

    def submit(ctx: Context, token: str | None, body: TryIn, compile_only: str | None, must_run: bool) -> str:
        service = get_service()
        if service is None:
            raise ToolError("try runs are off on this server")
        header = f"Bearer {token.strip()}" if token and token.strip() else (ctx.headers or {}).get("authorization")
        try:
            caller = service.caller(header)
        except Refused as exc:
            raise ToolError(f"{exc.detail} (pass it as the `token` argument or the MCP request's Authorization header)") from None
        s = service.settings
        try:
            unit = build_unit(body, s.try_max_source_bytes, s.try_max_targets, s.try_max_timeout_s)
        except Invalid as exc:
            raise ToolError("; ".join(f"{p.field}: {p.message}" for p in exc.problems)) from None
        if must_run and not unit.runs:
            raise ToolError(
                f"not a program: the block's mode is {unit.snippet.mode}; run_snippet runs a block with main() "
                "(or `run` in attributes); compile_snippet builds anything else"
            )
        try:
            submitted = service.submit(unit, caller, compile_only)
        except QuotaExceeded as exc:
            raise ToolError(exc.refusal.detail) from None
        except PoolFull as exc:
            raise ToolError(str(exc)) from None
        run = wait_done_blocking(service.results, submitted.row.id)
        if run is None:
            raise ToolError(
                f"try run {submitted.row.id} is still going: GET /api/try/{submitted.row.id} shows it when it is done"
            )
        return _summary(run, cached=not submitted.fresh)

    @server.tool(description=COMPILE_DOC, annotations=TRY_TOOL)
    def compile_snippet(
        ctx: Context,
        source: Source,
        lang: Lang = "cuda",
        targets: Targets | None = None,
        attributes: Attrs = "",
        token: Token = None,
        snippet_id: SnippetId = None,
    ) -> str:
        body = TryIn(source=source, lang=lang, targets=targets or [], attributes=attributes, snippet_id=snippet_id)
        return submit(ctx, token, body, "compile_snippet builds only (run_snippet runs programs)", must_run=False)

    @server.tool(description=RUN_DOC, annotations=TRY_TOOL)
    def run_snippet(
        ctx: Context,
        source: Source,
        lang: Lang = "cuda",
        targets: Targets | None = None,
        attributes: Attrs = "",
        token: Token = None,
        snippet_id: SnippetId = None,
    ) -> str:
        body = TryIn(source=source, lang=lang, targets=targets or [], attributes=attributes, snippet_id=snippet_id)
        return submit(ctx, token, body, None, must_run=True)
