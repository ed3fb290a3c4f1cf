"""Shared by the agent-interface tests: a page with hidden setup lines, and evidence records for it.

The records are made up for these tests (host `test-fixture`) and live only in
a temporary index; they exercise how evidence is shown, not what a GPU did.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURE_WIKI, LiveServer, module_database

AGENT_PAGE = (
    """---
id: agent-demo
title: Agent demo kernels
type: technique
architectures: [sm90a, sm100a]
aliases: [AGENTDEMO]
tags: [demo]
confidence: verified
related: [hw-tma]
---
A demo page that agents read through the Markdown views and the MCP tools.

# Running a program

The program launches an empty kernel and prints a word.

```cuda run output="OK"
//! #include <cstdio>
//! #define HIDDEN_SETUP_MACRO 1
__global__ void empty() {}
int main() { empty<<<1, 1>>>(); cudaDeviceSynchronize(); printf("OK\\n"); return 0; }
```

## A python check

```python
#! import hidden_setup_module
print("visible python line")
```

# Long notes

"""
    + "\n".join(f"Zebrafish note {i}: a line of padding prose that makes this section long enough to cut." for i in range(60))
    + "\n"
)


def write_agent_page(wiki: Path) -> None:
    (wiki / "agent-demo.md").write_text(AGENT_PAGE, encoding="utf-8")


def agent_records(store: Any) -> list[dict[str, Any]]:
    """Evidence for agent-demo:1: compiled and ran on sm_90a; compiled on sm_100a, run skipped (no such GPU)."""
    with store.engine.connect() as conn:
        snippet = next(s for s in store.evidence.snippets_with_evidence(conn, page_id="agent-demo") if s.id == "agent-demo:1")
    base = {
        "snippet_id": snippet.id,
        "page_id": "agent-demo",
        "content_hash": snippet.content_hash,
        "timestamp": "2026-12-01T10:00:00Z",
        "host": "test-fixture",
        "toolchain": "nvcc 13.0.88",
    }
    rows = [
        ("sm_90a", "compile", "pass", "", None),
        ("sm_90a", "run", "pass", "exit status 0", "NVIDIA H200"),
        ("sm_100a", "compile", "pass", "", None),
        ("sm_100a", "run", "skipped", "not run: no sm_100 device here", None),
    ]
    return [
        {
            **base,
            "record_id": f"agent-demo-{target}-{step}",
            "target": target,
            "step": step,
            "status": status,
            "message": message,
            "gpu_name": gpu,
            "output": "OK\n" if gpu else "",
        }
        for target, step, status, message, gpu in rows
    ]


def prepared_store(settings: Any) -> Any:
    """The fixture wiki plus the agent page, indexed, with the agent page's evidence."""
    from app.main import prepare_store

    write_agent_page(settings.wiki)
    store = prepare_store(settings)
    result = store.evidence.add(agent_records(store), origin="test")
    assert result.inserted == 4 and not result.errors, result
    return store


@pytest.fixture
def agent_live(settings) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    """The service over real HTTP on the fixture wiki plus the agent demo page and its evidence."""
    from app.main import create_app

    store = prepared_store(settings)
    with LiveServer(create_app(settings, store=store)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            client.server = server  # type: ignore[attr-defined]
            yield client


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_agent_settings(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`settings` for a module's shared agent store and server: a copy of the fixture wiki, once per backend."""
    from app.settings import Settings

    folder = tmp_path_factory.mktemp("shared-agent")
    shutil.copytree(FIXTURE_WIKI, folder / "wiki")
    (folder / "evidence").mkdir()
    with module_database(request, folder) as url:
        yield Settings(wiki=folder / "wiki", db=url, evidence=folder / "evidence", runner_token="test-runner-token")


@pytest.fixture(scope="module")
def shared_agent_store(shared_agent_settings: Any) -> Iterator[Any]:
    """`prepared_store`, once per backend (and xdist worker) for a module's tests that only read it, instead of a
    schema, an index and the evidence per test."""
    store = prepared_store(shared_agent_settings)
    yield store
    store.engine.dispose()


@pytest.fixture(scope="module")
def shared_agent_live(shared_agent_settings: Any, shared_agent_store: Any) -> Iterator[httpx.Client]:
    """`agent_live` over `shared_agent_store`, once per backend for a module's tests that only read (a test that
    counts renderings or adds evidence takes `agent_live`)."""
    from app.main import create_app

    with LiveServer(create_app(shared_agent_settings, store=shared_agent_store)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            client.server = server  # type: ignore[attr-defined]
            yield client
