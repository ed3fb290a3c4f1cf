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


COMPILED_PAGE = """---
id: lang-cute-compile
title: A CuTe-DSL kernel with a compile entry point
type: language
architectures: [sm90a, sm100a]
tags: [cute-dsl]
reproducibility: snippet
---

# Compiled without a GPU

```python
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_tensor


@cute.kernel
def add_one(x: cute.Tensor):
    tid, _, _ = cute.arch.thread_idx()
    x[tid] = x[tid] + 1.0


@cute.jit
def host(x: cute.Tensor):
    add_one(x).launch(grid=(1, 1, 1), block=(32, 1, 1))


def kw_compile():
    return cute.compile(host, make_fake_tensor(cutlass.Float32, (32,), stride=(1,)))
```

A compile entry point that breaks:

```python
import cutlass
import cutlass.cute as cute


def kw_compile():
    return cute.compile(cute.make_layout, 1, 2, 3, 4)
```
"""


@needs_dsl
def test_construction_code_runs_and_kw_compile_compiles_in_the_sandbox_for_each_target(tmp_path: Path) -> None:
    import shutil

    root = Path(shutil.copytree(REPO, tmp_path / "repo"))
    (root / "wiki" / "languages" / "cute-compile.md").write_text(COMPILED_PAGE)
    report = verify(
        root,
        pages=["lang-cute-compile", "lang-cute-dsl"],
        compile_only=True,
        use_cache=False,
        jobs=1,
        cache_dir=tmp_path / "cache",
    )
    by = {r.snippet_id: r for r in report.records if r.step == "compile"}
    compiled = [r for r in report.records if r.snippet_id == "lang-cute-compile:1" and r.step == "compile"]
    assert compiled and all(r.status == "pass" for r in compiled), [(r.target, r.message) for r in compiled]
    messages = " ".join(r.message for r in compiled)
    assert "CUTE_DSL_ARCH=sm_90a" in messages and "CUTE_DSL_ARCH=sm_100a" in messages and "kw_compile() compiled" in messages
    broken = by["lang-cute-compile:2"]
    assert broken.status == "fail" and "kw_compile() failed in the sandbox" in broken.message
    construction = by["lang-cute-dsl:1"]  # tcgen05 construction code only: it runs for sm_100a, nothing to compile
    assert construction.status == "syntax-ok" and "construction code ran in the sandbox with CUTE_DSL_ARCH=sm_100a" in (
        construction.message
    )
    assert by["lang-cute-dsl:2"].status == "fail" and "has no module 'cute'" in by["lang-cute-dsl:2"].message


@needs_dsl
def test_construction_code_the_arch_refuses_fails_naming_the_error() -> None:
    from runner.cute_dsl import sandbox_check

    status, detail = sandbox_check(REAL, sys.executable, "sm90a", None)
    assert status == "fail" and detail.startswith("construction code failed in the sandbox with CUTE_DSL_ARCH=sm_90a: ")
    assert sandbox_check(REAL, sys.executable, "sm100a", None)[0] == "syntax-ok"


@needs_dsl
def test_an_excerpt_of_a_larger_dsl_program_is_an_unverified_fragment_not_a_failure() -> None:
    from runner.cute_dsl import sandbox_check

    undefined = "import cutlass\nlayout = cute.make_layout((4, 8))\n"  # `cute` comes from a part of the program not shown
    status, detail = sandbox_check(undefined, sys.executable, "sm90a", None)
    assert status == "unverified" and detail.startswith("fragment: not a complete program (NameError: name 'cute'")
    outside_jit = REAL + "tiled_mma = cute.make_tiled_mma(op)\n"  # only allowed while a @cute.jit function compiles
    status, detail = sandbox_check(outside_jit, sys.executable, "sm100a", None)
    assert status == "unverified" and "CALL_OUTSIDE_JIT" in detail and "\x1b" not in detail, detail
