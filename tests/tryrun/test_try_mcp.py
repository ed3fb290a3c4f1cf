"""The MCP tools compile_snippet and run_snippet at /mcp of a service with try runs on, driven by the official client."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from runner.sandbox import ISOLATION_BWRAP, isolation_problem
from tests.tryrun.conftest import KERNEL, PROGRAM, serve, try_settings

TIMEOUT_S = 240


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_the_try_tools_say_what_a_pass_proves_and_follow_the_api_rules(tmp_path: Path, wiki_dir: Path) -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        pytest.skip(f"bubblewrap unusable here: {problem}")
    with serve(try_settings(tmp_path, wiki_dir)) as client:
        token = client.token("agent")
        url = str(client.http.base_url).rstrip("/") + "/mcp"

        async def conversation() -> None:
            async with Client(url) as mcp:
                tools = {t.name: t for t in (await mcp.list_tools()).tools}
                assert {"compile_snippet", "run_snippet", "search"} <= set(tools)
                for name in ("compile_snippet", "run_snippet"):
                    doc = tools[name].description or ""
                    assert "not page evidence" in doc and "no performance" in doc and "no SM100 GPU" in doc
                    assert "compiled for each target (sm_XX) with the nvcc version" in doc
                    assert tools[name].annotations is not None and tools[name].annotations.read_only_hint is False
                assert "ran on the GPU the answer names" in (tools["run_snippet"].description or "")
                refused = await mcp.call_tool("compile_snippet", {"source": KERNEL, "targets": ["sm_90a"]})
                assert refused.is_error and "try runs need an API token" in _text(refused)
                bad = await mcp.call_tool(
                    "compile_snippet", {"source": KERNEL, "targets": ["sm_90a"], "attributes": 'flags="$(id)"', "token": token}
                )
                assert bad.is_error and "attributes: flags=: '$(id)' is not allowed" in _text(bad)
                built = await mcp.call_tool(
                    "compile_snippet", {"source": KERNEL, "targets": ["sm_90a"], "attributes": 'sass="FMUL"', "token": token}
                )
                text = _text(built)
                assert not built.is_error, text
                assert "sm_90a compile: **pass**" in text and "check sass `FMUL`: ok" in text and "SASS for sm_90a:" in text
                assert "sandbox: bwrap" in text and "not page evidence" in text
                not_program = await mcp.call_tool("run_snippet", {"source": KERNEL, "targets": ["sm_90a"], "token": token})
                assert not_program.is_error and "not a program" in _text(not_program)

            async with (
                create_mcp_http_client({"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as mcp,
            ):
                ran = await mcp.call_tool("run_snippet", {"source": PROGRAM, "targets": ["sm_90a"]})  # the header's token
                text = _text(ran)
                assert not ran.is_error, text
                assert "sm_90a run: **skipped**" in text and "no GPU on this server" in text  # this machine has none

        async def bounded() -> None:
            with anyio.fail_after(TIMEOUT_S):
                await conversation()

        anyio.run(bounded)
