"""Fixtures for the runner tests: the real toolchain, a session-wide result cache, page helpers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.toolchain import Toolchain, discover_toolchain
from tests.ci import missing_tool

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    """The real CUDA toolchain; tests that need nvcc are skipped where there is none (a failure under CI=true)."""
    tc = discover_toolchain()
    if not tc.nvcc:
        missing_tool("nvcc not found: " + "; ".join(tc.notes))
    return tc


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One result cache for the whole session: identical snippets are compiled once (2 slow cores)."""
    return tmp_path_factory.mktemp("kw-cache")


def _page_text(page_id: str, body: str, archs: str = "[sm90a]") -> str:
    return f"---\nid: {page_id}\ntitle: Test page {page_id}\ntype: concept\narchitectures: {archs}\n---\n\n" + textwrap.dedent(
        body
    )


@pytest.fixture()
def page_text():  # noqa: ANN201
    """page_text(page_id, body, archs="[sm90a]") -> a page with front matter (the body starts on file line 7)."""
    return _page_text


@pytest.fixture()
def repo_root() -> Path:
    return ROOT


@pytest.fixture()
def make_wiki(tmp_path: Path):  # noqa: ANN201
    """make_wiki({"name.md": page_text(...)}) -> wiki root."""

    def make(pages: dict[str, str]) -> Path:
        root = tmp_path / "wiki"
        for name, text in pages.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return root

    return make


@pytest.fixture(scope="session")
def nvrtc_root() -> Path:
    """CUDA 12.9 (with NVRTC: device-only builds) and the disassembler installed (from pip's cache when it has them)."""
    from runner.toolchains import DISASM, install_toolchain, select_toolchain, toolchains_dir

    base = toolchains_dir().resolve()
    for release in ("12.9", DISASM):
        result = install_toolchain(release, base)
        if result.error:
            missing_tool(f"CUDA {release} wheels not installable here (make toolchains installs them): {result.error}")
    assert select_toolchain("12.9", base).nvrtc  # an install made before NVRTC was part of 12.x is completed
    return base
