"""Kept SASS/PTX, diffs, the matrix and /changes over real HTTP, JSON and HTML.

The evidence folder holds tests/fixtures/matrix_evidence: the matrix of tests/fixtures/matrix_wiki
as runner/matrix.py recorded it with nvcc 13.0.88 (system) and 13.1.115 (pip wheels), artifacts
included; the wiki is the fixture wiki plus that page, so UTMALDG links to the TMA page by its alias.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.evidence.matrix_cells import load_matrix_file
from app.index.db import make_engine
from runner.matrix import MatrixCell, read_cells, write_cells
from tests.conftest import LiveServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def client(tmp_path: Path, wiki_dir: Path) -> Iterator[httpx.Client]:
    from app.main import create_app
    from app.settings import Settings

    shutil.copy(FIXTURES / "matrix_wiki" / "axpy.md", wiki_dir / "axpy.md")
    evidence = tmp_path / "evidence"
    shutil.copytree(FIXTURES / "matrix_evidence", evidence)
    settings = Settings(wiki=wiki_dir, db=f"sqlite:///{tmp_path / 'kw.db'}", evidence=evidence, runner_token="t")
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        c.evidence = evidence  # type: ignore[attr-defined]
        c.db = settings.db  # type: ignore[attr-defined]
        yield c


def test_sass_and_ptx_come_back_per_target_and_toolchain(client: httpx.Client) -> None:
    newest = client.get("/api/snippets/matrix-axpy:3/sass", params={"target": "sm_90a"}).json()
    assert newest["release"] == "13.1" and newest["toolchain"] == "nvcc 13.1.115"
    assert "UTMALDG" in newest["families"] and ".line snippet 6" in newest["text"]
    older = client.get("/api/snippets/matrix-axpy:3/sass", params={"target": "sm_90a", "toolchain": "13.0"}).json()
    assert older["release"] == "13.0" and older["sha256"] == newest["sha256"]  # same SASS from both releases
    ptx = client.get("/api/snippets/matrix-axpy:3/ptx", params={"target": "sm_100a", "toolchain": "13.0"}).json()
    assert ".target sm_100a" in ptx["text"] and "cp.async.bulk.tensor" in ptx["text"]


def _detail(response: httpx.Response) -> str:
    return str(response.json()["error"]["detail"])


def test_what_is_not_there_is_a_404_naming_the_parameter(client: httpx.Client) -> None:
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/api/snippets/nope:1/sass", {}, "snippet"),
        ("/api/snippets/matrix-axpy:1/sass", {"target": "sm_80"}, "target"),
        ("/api/snippets/matrix-axpy:1/sass", {"target": "sm_90a", "toolchain": "12.4"}, "toolchain"),
    ]
    for url, params, name in cases:
        response = client.get(url, params=params)
        assert response.status_code == 404 and _detail(response).startswith(f"{name}:"), (url, response.text)
    bad = client.get("/api/snippets/matrix-axpy:1/sass", params={"target": "'; drop"})
    assert bad.status_code == 422
    mixed = client.get("/api/snippets/matrix-axpy:1/diff", params={"a": "sm_90a", "b": "13.0"})
    assert mixed.status_code == 422 and "a, b" in _detail(mixed)


def test_diffs_target_against_target_and_toolchain_against_toolchain(client: httpx.Client) -> None:
    d = client.get("/api/snippets/matrix-axpy:1/diff", params={"a": "sm_90a", "b": "sm_100a"}).json()
    assert d["a"] == "sm_90a" and d["b"] == "sm_100a" and not d["identical"]
    assert "LDCU" in d["families_only_b"] and d["resources"]["registers"] == [12, 12]
    assert d["a_source"]["release"] == d["b_source"]["release"] == "13.1"
    rows = d["functions"][0]["rows"]
    assert any(r["line"] == 6 and r["same"] for r in rows) and any(not r["same"] for r in rows)
    t = client.get("/api/snippets/matrix-axpy:1/diff", params={"a": "13.0", "b": "13.1", "target": "sm_90a"}).json()
    assert t["a"] == "CUDA 13.0" and t["identical"]


def test_the_matrix_and_the_changes_show_flips_between_neighbouring_toolchains(client: httpx.Client) -> None:
    m = client.get("/api/snippets/matrix-axpy:1/matrix").json()
    assert m["releases"] == ["13.0", "13.1"] and m["known_good"] == "known good: CUDA 13.0–13.1" and m["flips"] == []
    assert client.get("/api/changes").json()["total"] == 0
    # A recorded regression: 13.1's cell for sm_90a fails and spills.
    path: Path = client.evidence / "matrix" / "cells.jsonl"  # type: ignore[attr-defined]
    cells = read_cells(path)
    for c in cells:
        if (c.snippet_id, c.target, c.release) == ("matrix-axpy:1", "sm_90a", "13.1"):
            c.status, c.message, c.spill_bytes, c.registers = "fail", "error: bad", 16, 20
    write_cells(path, cells)
    engine = make_engine(client.db)  # type: ignore[attr-defined]
    loaded = load_matrix_file(engine, client.evidence)  # type: ignore[attr-defined]  # as `kernelwiki index` does
    engine.dispose()
    assert (loaded.replaced, loaded.inserted, loaded.removed) == (1, 0, 0)
    changes = client.get("/api/changes").json()
    kinds = {ch["kind"] for ch in changes["changes"]}
    assert kinds == {"status", "registers", "spills"} and changes["total"] == 3
    assert client.get("/api/snippets/matrix-axpy:1/matrix").json()["known_good"] == "known good: CUDA 13.0 · fail since 13.1"
    html = client.get("/changes")
    assert html.status_code == 200 and "matrix-axpy:1" in html.text and "spills appear" in html.text


def test_the_sass_page_interleaves_source_lines_and_links_families_without_script(client: httpx.Client) -> None:
    page = client.get("/snippets/matrix-axpy:3/sass", params={"target": "sm_90a"})
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    text = page.text
    # one instruction a line; the family coloured and linked to its page through the alias
    assert '\n    <a class="op fam-tma" href="/pages/hw-tma">UTMALDG.1D [UR1], [UR3] ;</a>\n' in text
    assert '<span class="src">// snippet 7</span>\n    EXIT ;\n</code>' in text
    assert '<span class="src">// snippet 6</span>' in text
    assert "known good: CUDA 13.0–13.1" in text and "registers" in text
    diff = client.get("/snippets/matrix-axpy:1/diff", params={"a": "sm_90a", "b": "sm_100a"})
    assert diff.status_code == 200 and "Only in sm_90a" in diff.text and 'class="changed"' in diff.text
    wiki_page = client.get("/pages/matrix-axpy").text  # the page shows each snippet's matrix line under its evidence
    assert (
        '<a href="/snippets/matrix-axpy%3A3/sass">SASS</a> · known good: CUDA 13.0–13.1 (2 toolchains: 13.0, 13.1)' in wiki_page
    )
    missing = client.get("/snippets/matrix-axpy:1/sass", params={"target": "sm_80"})
    assert missing.status_code == 404 and "target:" in missing.text


def test_cells_round_trip_through_jsonl(tmp_path: Path) -> None:
    cell = MatrixCell("p:1", "p", "sm_90a", "13.0", "nvcc 13.0.88", "h", "compile", "cuda", "pass", registers=8)
    write_cells(tmp_path / "m.jsonl", [cell])
    assert read_cells(tmp_path / "m.jsonl") == [cell]


def test_the_mcp_tool_get_sass_answers_with_the_listing_and_its_matrix(tmp_path: Path, store) -> None:  # type: ignore[no-untyped-def]
    import anyio
    from mcp import Client

    from app.agents.mcp_server import build_server

    evidence = tmp_path / "ev"
    shutil.copytree(FIXTURES / "matrix_evidence", evidence)
    assert store.evidence.load_dir(evidence).errors == []  # the cells go into the index with the evidence
    server = build_server(lambda: store, "http://kw", evidence)

    async def conversation() -> list[tuple[bool, str]]:
        async with Client(server) as client:
            answers = []
            for args in (
                {"snippet_id": "matrix-axpy:3", "target": "sm_100a", "toolchain": "13.0"},
                {"snippet_id": "matrix-axpy:3", "kind": "ptx"},
                {"snippet_id": "matrix-axpy:1", "target": "sm_80"},
            ):
                result = await client.call_tool("get_sass", args)
                answers.append((bool(result.is_error), "\n".join(b.text for b in result.content if hasattr(b, "text"))))
            return answers

    (e1, sass), (e2, ptx), (e3, missing) = anyio.run(conversation)
    assert not e1 and sass.startswith("# SASS of matrix-axpy:3 for sm_100a, nvcc 13.0.88 (CUDA 13.0)")
    assert "UTMALDG" in sass and "known good: CUDA 13.0–13.1" in sass and "```sass" in sass
    assert not e2 and "```ptx" in ptx and "cp.async.bulk.tensor" in ptx
    assert e3 and "target: 'sm_80' is not a target" in missing
