"""The measuring harness travels with the blocks that use it: written beside the source, part of the hash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from snippets.build import build_translation_unit
from snippets.extract import extract_snippets
from snippets.harness import CUDA_HEADER, HARNESS_DIR, PYTHON_MODULE, companions
from tests.ci import missing_tool

USES = '```cuda run arch=sm_90\n#include "kw_measure.cuh"\nint main() { kw::Bench b("x"); return b.finish(); }\n```\n'
PLAIN = "```cuda run arch=sm_90\nint main() { return 0; }\n```\n"
PY = "```python run arch=sm_90a\nimport kw_measure\n\ndef main():\n    pass\n```\n"


def _one(body: str):  # noqa: ANN202
    (snippet,), problems = extract_snippets("p", "p.md", body, 5, ["sm90"])
    assert not problems
    return snippet


def test_a_block_that_includes_the_harness_gets_it_beside_its_source(tmp_path: Path) -> None:
    tu = build_translation_unit(_one(USES))
    assert list(tu.companions) == [CUDA_HEADER]
    tu.write(tmp_path)
    assert (tmp_path / CUDA_HEADER).read_text() == (HARNESS_DIR / CUDA_HEADER).read_text()
    assert build_translation_unit(_one(PLAIN)).companions == {}
    assert list(build_translation_unit(_one(PY)).companions) == [PYTHON_MODULE]


def test_the_harness_is_part_of_the_hash_only_of_blocks_that_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import snippets.harness as harness

    plain, uses = _one(PLAIN).content_hash, _one(USES).content_hash
    monkeypatch.setattr(harness, "harness_text", lambda name: "// changed harness\n")
    assert _one(PLAIN).content_hash == plain
    assert _one(USES).content_hash != uses


def test_only_an_include_or_import_line_counts() -> None:
    assert companions("cuda", ["// see kw_measure.cuh\nint x;"]) == {}
    assert companions("python", ["# kw_measure is not imported\n"]) == {}
    assert companions("ptx", ['#include "kw_measure.cuh"']) == {}


def test_the_header_compiles_without_nvml_or_a_gpu(tmp_path: Path) -> None:
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        missing_tool("nvcc not found")
    (tmp_path / "t.cu").write_text('#include "kw_measure.cuh"\nint main() { return 0; }\n')
    res = subprocess.run(
        [nvcc, "-I", str(HARNESS_DIR), "-gencode=arch=compute_90,code=sm_90", "-o", "t", "t.cu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
