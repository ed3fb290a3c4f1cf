"""The MCP server driven by the official `mcp` client: `kernelwiki mcp` over stdio, and /mcp of the service over HTTP."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from app.agents.mcp_server import build_server
from app.settings import Settings
from tests.app.agent_fixtures import agent_records, prepared_store, write_agent_page
from tests.app.evidence_records import tma_record
from tests.app.hostile_input import HOSTILE
from tests.conftest import FIXTURE_WIKI

TOOLS = {"search", "get_page", "get_snippet_evidence", "resolve", "get_sass"}  # get_sass: issue 24
TIMEOUT_S = 60


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    return result.is_error, text_of(result)


async def check_tools(client: Client) -> None:
    """The same conversation over any transport: every tool, its answers and its errors."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert "budget_tokens" in tools["search"].input_schema["properties"]
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools.values())
    for name in ("get_page", "get_snippet_evidence"):
        description = tools[name].description or ""
        assert all(f"`{s}`" in description for s in ("pass", "fail", "xfail", "unverified", "skipped", "stale"))
        assert "Blackwell" in description and "never run" in description

    error, text = await call(client, "search", query="cp.async.bulk")
    assert not error and "page `hw-tma`" in text and "get_page" in text
    error, text = await call(client, "search", query="empty kernel program", budget_tokens=800)
    assert not error and "## Agent demo kernels › Running a program (agent-demo#running-a-program)" in text
    assert "ran on NVIDIA H200" in text and "never run" in text and "HIDDEN_SETUP_MACRO" not in text
    error, text = await call(client, "search", query="zebrafish", budget_tokens=50)
    assert not error and "not one section fits in 50 tokens" in text
    error, text = await call(client, "search", query="memory", arch="sm90", type="hardware")
    assert not error and "page `hw-tma`" in text and "page `hw-tmem`" not in text

    error, text = await call(client, "get_page", id="agent-demo")
    assert not error and text.startswith("---\nid: agent-demo\n") and "> Evidence agent-demo:1 (cuda, run)" in text
    assert "HIDDEN_SETUP_MACRO" not in text and "hidden_setup_module" not in text
    error, text = await call(client, "get_page", id="hw-tma", sections=["pitfalls"])
    assert not error and "## Pitfalls" in text and "# Loading a tile" not in text
    error, text = await call(client, "get_page", id="hw-tma", sections=["Loading a tile"])
    assert not error and "# Loading a tile" in text and "## Pitfalls" in text  # a section brings its subsections

    error, text = await call(client, "get_snippet_evidence", snippet_id="agent-demo:1")
    assert not error and "# Evidence for snippet agent-demo:1" in text
    assert "sm_90a run: **pass**; NVIDIA H200" in text and "sm_100a run: **skipped**" in text
    error, text = await call(client, "resolve", name="utmaldg")
    assert not error and text.startswith("hw-tma: Tensor Memory Accelerator (TMA)")

    # Mistakes are tool errors with a way forward, and the server keeps answering.
    error, text = await call(client, "get_page", id="nope")
    assert error and text.endswith("no page has the id 'nope'. Use search or resolve to find page ids.")
    error, text = await call(client, "get_page", id="TMA")
    assert error and "alias of page 'hw-tma'" in text
    error, text = await call(client, "get_page", id="hw-tma", sections=["nope"])
    assert error and "no section 'nope'" in text and "loading-a-tile, pitfalls" in text
    error, text = await call(client, "get_snippet_evidence", snippet_id="hw-tma")
    assert error and "e.g. hw-tma:1" in text
    error, text = await call(client, "get_snippet_evidence", snippet_id="hw-tma:99")
    assert error and "no snippet 'hw-tma:99'" in text
    error, text = await call(client, "resolve", name="no such thing at all")
    assert error and "no page has the alias, title or id 'no such thing at all'" in text
    error, text = await call(client, "search", query="tma", limit=0)
    assert error and "limit" in text
    error, text = await call(client, "search", query="tma", budget_tokens=10)
    assert error and "budget_tokens" in text
    error, text = await call(client, "search", query="   ")
    assert error and "query is empty" in text
    error, text = await call(client, "no_such_tool")
    assert error and "no_such_tool" in text
    error, text = await call(client, "resolve", name="TMEM")
    assert not error and text.startswith("hw-tmem:")


def run(conversation: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT_S):
            await conversation()

    anyio.run(bounded)


def kernelwiki_command() -> list[str]:
    """The installed `kernelwiki` script beside this interpreter, else the same CLI through `-m`."""
    script = Path(sys.executable).with_name("kernelwiki")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli.main"]


def test_stdio_server_spawned_by_the_cli_answers_every_tool(tmp_path: Path) -> None:
    wiki = tmp_path / "wiki"
    shutil.copytree(FIXTURE_WIKI, wiki)
    write_agent_page(wiki)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    # The agent page's evidence, as a committed JSONL file the server loads at start.
    scratch = prepared_store(Settings(wiki=wiki, db=f"sqlite:///{tmp_path / 'scratch.db'}", evidence=evidence))
    (evidence / "fixture.jsonl").write_text("".join(json.dumps(r) + "\n" for r in agent_records(scratch)))
    scratch.engine.dispose()

    command = kernelwiki_command()
    params = StdioServerParameters(
        command=command[0],
        args=[
            *command[1:],
            "mcp",
            "--wiki",
            str(wiki),
            "--db",
            f"sqlite:///{tmp_path / 'index.db'}",
            "--evidence",
            str(evidence),
        ],
        cwd=str(tmp_path),
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )

    async def conversation() -> None:
        async with Client(params) as client:
            await check_tools(client)

    run(conversation)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_endpoint_of_the_service_answers_every_tool(shared_agent_live, mode: str) -> None:  # type: ignore[no-untyped-def]
    server = shared_agent_live.server  # the tools only read: one prepared store and server per backend for the module

    async def conversation() -> None:
        async with Client(f"{server.url}/mcp", mode=mode) as client:
            await check_tools(client)

    run(conversation)
    # The rest of the service is unaffected by the mounted endpoint.
    assert httpx.get(f"{server.url}/api/resolve", params={"name": "tmem"}).json()["id"] == "hw-tmem"


def test_http_endpoint_refuses_what_is_not_an_mcp_post_from_this_host(shared_agent_live) -> None:  # type: ignore[no-untyped-def]
    """GET answers 405 at once (a stateless server pushes nothing); another Host or Origin is refused (DNS rebinding)."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }
    accept = {"accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=shared_agent_live.server.url, timeout=10) as http:  # refused or read only: the shared server
        get = http.get("/mcp", headers={"accept": "text/event-stream"})
        assert get.status_code == 405 and get.headers["allow"] == "POST" and get.json()["error"]["status"] == 405
        ok = http.post("/mcp", json=initialize, headers=accept)
        assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "kernelwiki"
        assert http.post("/mcp", json=initialize, headers={**accept, "host": "evil.example"}).status_code == 421
        assert http.post("/mcp", json=initialize, headers={**accept, "origin": "http://evil.example"}).status_code == 403


@pytest.mark.parametrize("query", HOSTILE, ids=[repr(q[:20]) for q in HOSTILE])
def test_hostile_arguments_get_answers_or_tool_errors_never_a_crash(shared_store, query: str) -> None:  # noqa: ANN001
    """Any string in any argument: an answer or an anticipated tool error, never the SDK's bare crash message."""
    store = shared_store  # they only read: one index per backend for the 66 cases
    server = build_server(lambda: store, "http://kw")
    calls = [
        ("search", {"query": query}),
        ("search", {"query": query[:2000], "budget_tokens": 500}),
        ("search", {"query": "tma", "arch": query[:100], "type": query[:100]}),
        ("get_page", {"id": query[:200]}),
        ("get_page", {"id": "hw-tma", "sections": [query[:200]]}),
        ("get_snippet_evidence", {"snippet_id": query[:300]}),
        ("get_snippet_evidence", {"snippet_id": f"{query[:200]}:1"}),
        ("get_snippet_evidence", {"snippet_id": "hw-tma:1", "next": query[:2000]}),
        ("resolve", {"name": query[:500]}),
    ]

    async def conversation() -> None:
        async with Client(server) as client:
            for tool, arguments in calls:
                error, text = await call(client, tool, **arguments)
                assert text and text != f"Error executing tool {tool}", (tool, arguments)
            error, text = await call(client, "resolve", name="tma")
            assert not error and text.startswith("hw-tma:")

    run(conversation)


def test_snippet_evidence_comes_a_window_at_a_time_with_the_token_for_older_records(store) -> None:  # type: ignore[no-untyped-def]
    import re

    from app.evidence.store import HISTORY_LIMIT

    stamps = [f"2026-12-01T00:{n // 60:02d}:{n % 60:02d}Z" for n in range(HISTORY_LIMIT + 11)]
    records = [tma_record(record_id=f"m{n}", timestamp=stamp) for n, stamp in enumerate(stamps)]
    assert store.evidence.add(records, origin="test").inserted == len(stamps)
    server = build_server(lambda: store, "http://kw")
    shown: list[str] = []

    async def conversation() -> None:
        async with Client(server) as client:
            error, text = await call(client, "get_snippet_evidence", snippet_id="hw-tma:1")
            assert not error and f"{len(stamps)} records, newest first; {HISTORY_LIMIT} shown here" in text
            arguments: dict[str, Any] = {"snippet_id": "hw-tma:1", "limit": 7}
            while True:
                error, text = await call(client, "get_snippet_evidence", **arguments)
                assert not error, text
                page = re.findall(r"^- (\S+) sm_90a compile", text, re.M)
                assert 0 < len(page) <= 7
                shown.extend(page)
                more = re.search(r"next='([^']+)'\)\.$", text)
                if more is None:
                    break
                arguments["next"] = more.group(1)
            error, text = await call(client, "get_snippet_evidence", snippet_id="hw-tma:1", next="not-a-token")
            assert error and "next: not a token this service gave out" in text
            error, text = await call(client, "get_snippet_evidence", snippet_id="hw-tma:1", limit=1000)
            assert error and "limit" in text

    run(conversation)
    assert [s.replace(".000000", "") for s in shown] == sorted(stamps, reverse=True)
