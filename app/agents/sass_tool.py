"""The MCP tool `get_sass`: a snippet's kept SASS for one target and toolchain, with its matrix line (app/evidence/artifacts.py)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from app.evidence.artifacts import ArtifactNotFound, MatrixData, families

GET_SASS_DOC = """The SASS a snippet compiled to, for one target (sm_90a, sm_100a, ...) and one CUDA toolchain
(13.0, 13.1, ...; default the newest that built it), normalised: no addresses or encodings, registers and
labels renumbered, each group of instructions under a `.line snippet N` naming the snippet line it came
from. Also: the ptxas resources (registers, shared memory, spills), the instruction families present,
and the snippet's toolchain matrix line ("known good: CUDA 13.0–13.1 · fail since 13.2").
kind="ptx" returns the PTX instead. A snippet id is the page id, a colon and the block number (hw-tma:1)."""

MAX_LISTING_CHARS = 60_000
"""Longer listings are cut (the tool says so); the full text is at /api/snippets/{id}/sass."""


def add_sass_tool(server: MCPServer, data: MatrixData, annotations: ToolAnnotations) -> None:
    """Register `get_sass` on `server`, reading cells and artifacts through `data`."""

    @server.tool(description=GET_SASS_DOC, annotations=annotations)
    def get_sass(
        snippet_id: Annotated[str, Field(description="PAGE_ID:N, e.g. hw-tma:1", min_length=3, max_length=300)],
        target: Annotated[str | None, Field(description="e.g. sm_90a (default: the first target)", max_length=32)] = None,
        toolchain: Annotated[str | None, Field(description="CUDA release, e.g. 13.0 (default: newest)", max_length=64)] = None,
        kind: Annotated[str, Field(description="sass or ptx", pattern="^(sass|ptx)$")] = "sass",
    ) -> str:
        try:
            listing = data.listing(snippet_id.strip(), target, toolchain, kind)
            matrix = data.matrix(snippet_id.strip())
        except ArtifactNotFound as exc:
            raise ToolError(f"{exc}. The toolchain matrix is recorded by `kernelwiki matrix`.") from None
        res = listing.resources
        lines = [
            f"# {kind.upper()} of {listing.snippet_id} for {listing.target}, {listing.toolchain} (CUDA {listing.release})",
            "",
            f"Matrix: {matrix['known_good'] or 'no cells'}; toolchains {', '.join(matrix['releases'])}; "
            f"targets {', '.join(matrix['targets'])}.",
        ]
        if res:
            lines.append(
                "ptxas: "
                + ", ".join(
                    f"{k.replace('_', ' ')} {res[k]}"
                    for k in ("registers", "smem_bytes", "spill_store_bytes", "spill_load_bytes")
                    if k in res
                )
            )
        if kind == "sass":
            lines.append("Families: " + ", ".join(families(listing.text)))
        for flip in matrix["flips"][:10]:
            lines.append(f"Flip {flip['before']} → {flip['after']} on {flip['target']}: {flip['kind']}: {flip['detail']}")
        text = listing.text
        if len(text) > MAX_LISTING_CHARS:
            text = text[:MAX_LISTING_CHARS] + f"\n// [cut at {MAX_LISTING_CHARS} characters of {len(listing.text)}]\n"
        lines += ["", "```" + kind, text.rstrip("\n"), "```"]
        return "\n".join(lines)
