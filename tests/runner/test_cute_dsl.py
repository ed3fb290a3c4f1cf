"""CuTe-DSL blocks checked by name against the released DSL (the optional extra `cute`, nvidia-cutlass-dsl 4.8.1).

The extra is not installed by `make setup` (about 490 MB): these tests skip without it, saying so, in CI too.
Install it with `.venv/bin/pip install -e '.[cute]'` to run them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.cute_dsl import dsl_installed, judge, lookups, uses_dsl
from runner.verify import verify

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "kwrepo"
PAGE = (REPO / "wiki/languages/cute-dsl.md").read_text()
REAL, PSEUDO = (b.split("```")[0] for b in PAGE.split("```python\n")[1:3])

needs_dsl = pytest.mark.skipif(
    dsl_installed(sys.executable) is None,
    reason="the optional extra `cute` (nvidia-cutlass-dsl 4.8.1, ~490 MB) is not installed: pip install -e '.[cute]'",
)


def test_dsl_blocks_are_recognized_and_their_names_listed_without_running_them() -> None:
    assert uses_dsl(REAL) and uses_dsl(PSEUDO) and not uses_dsl("import math\n")
    assert ("cutlass.cute.nvgpu", ["tcgen05", "MmaF16BF16Op"]) in lookups(REAL)
    assert lookups(PSEUDO) == [("cute", [])]


@needs_dsl
def test_names_resolve_in_the_real_dsl_and_a_missing_one_is_named() -> None:
    ok = judge(REAL, sys.executable)
    assert ok is not None and ok[0] == "syntax-ok" and "resolve in nvidia-cutlass-dsl 4.8.1" in ok[1]
    assert judge(PSEUDO, sys.executable) == ("fail", "nvidia-cutlass-dsl 4.8.1 has no module 'cute'")
    wrong = "import cutlass.cute as cute\nx = cute.make_tma_copy_sm100(1)\n"
    assert judge(wrong, sys.executable) == ("fail", "nvidia-cutlass-dsl 4.8.1 has no 'cutlass.cute.make_tma_copy_sm100'")


@needs_dsl
def test_verify_reports_the_pseudo_dsl_block_as_failing_with_the_missing_name(tmp_path: Path) -> None:
    report = verify(REPO, pages=["lang-cute-dsl"], compile_only=True, use_cache=False, jobs=1, cache_dir=tmp_path)
    by = {r.snippet_id: r for r in report.records}
    assert by["lang-cute-dsl:1"].status == "syntax-ok"
    assert by["lang-cute-dsl:2"].status == "fail" and "has no module 'cute'" in by["lang-cute-dsl:2"].message
