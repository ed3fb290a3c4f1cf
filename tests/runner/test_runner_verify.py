"""Verifying a wiki end to end: pages in, evidence out, the cache making a warm run nearly free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.evidence import read_jsonl
from runner.sandbox import process
from runner.toolchain import Toolchain
from runner.verify import verify

KERNEL = """\
```cuda
__device__ __forceinline__ float square(float x) { return x * x; }
__global__ void scale(float* out, const float* in, int n) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { tile[threadIdx.x] = in[i]; __syncthreads(); out[i] = square(tile[threadIdx.x]); }
}
```
"""

BROKEN = "```cuda\n__global__ void k(int* p) { p[0] = not_declared; }\n```\n"

SKETCH_AND_PYTHON = "```cuda sketch\nfor each tile: load, mma, store\n```\n\n```python\nprint(sum(range(10)))\n```\n"


def test_cold_then_warm_verify_reuses_every_result(
    make_wiki,
    page_text,
    toolchain: Toolchain,
    shared_cache: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    wiki = make_wiki(
        {
            "a/kernel.md": page_text("t-kernel", KERNEL + "\n" + SKETCH_AND_PYTHON),
            "b/broken.md": page_text("t-broken", BROKEN),
            "c/bad-front-matter.md": "---\nid: Not Valid\n---\nbody\n",
        }
    )
    seen: list[tuple[int, int, str, str, str]] = []
    cold = verify(wiki, jobs=2, cache_dir=shared_cache, toolchain=toolchain, gpus=[], progress=lambda *a: seen.append(a))
    statuses = {(r.snippet_id, r.step): r.status for r in cold.records}
    assert statuses == {
        ("t-kernel:1", "compile"): "pass",
        ("t-kernel:2", "compile"): "unverified",
        ("t-kernel:3", "compile"): "syntax-ok",  # Python byte-compiled only: never a pass
        ("t-broken:1", "compile"): "fail",
    }
    assert cold.exit_code == 1
    assert any(p.path == "c/bad-front-matter.md" and p.severity == "error" for p in cold.problems)
    assert [s[:2] for s in sorted(seen)] == [(i, 4) for i in range(1, 5)]
    assert cold.summary["t-kernel"]["sm_90a"] == {
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "unverified": 1,
        "syntax ok": 1,
        "xfail": 0,
    }
    broken = next(r for r in cold.records if r.snippet_id == "t-broken:1")
    assert broken.path == "b/broken.md" and broken.line == 8 and broken.error_line == 9

    started: list[list[str]] = []
    supervise = process._supervise
    monkeypatch.setattr(
        process, "_supervise", lambda full, argv, *a, **kw: started.append(argv) or supervise(full, argv, *a, **kw)
    )
    warm = verify(wiki, jobs=2, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    assert warm.builds == 0 and warm.cache_hits == 3
    assert started == [] and warm.isolation is None, "a warm run starts no process: every result comes from the cache"
    assert [r.to_dict() for r in warm.records] == [r.to_dict() for r in cold.records]


def test_page_and_target_filters(make_wiki, page_text, toolchain: Toolchain, shared_cache: Path) -> None:  # noqa: ANN001
    wiki = make_wiki(
        {
            "k.md": page_text("t-two-targets", KERNEL, archs="[sm90a, sm100a]"),
            "o.md": page_text("t-other", SKETCH_AND_PYTHON),
        }
    )
    report = verify(wiki, pages=["t-two-targets"], targets=["sm90a"], cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    assert {(r.snippet_id, r.target) for r in report.records} == {("t-two-targets:1", "sm_90a")}
    missing = verify(wiki, pages=["no-such-page"], cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    assert missing.records == [] and missing.exit_code == 1


def test_no_cache_forces_a_rebuild(make_wiki, page_text, toolchain: Toolchain, shared_cache: Path) -> None:  # noqa: ANN001
    wiki = make_wiki({"p.md": page_text("t-python", "```python\nprint('forced')\n```\n")})
    first = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    again = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    forced = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[], use_cache=False)
    assert (again.builds, again.cache_hits) == (0, 1)
    assert (forced.builds, forced.cache_hits) == (1, 0)
    assert forced.records[0].status == first.records[0].status == "syntax-ok"


def test_invalid_block_is_an_error_record_and_fails_the_run(
    make_wiki, page_text, toolchain: Toolchain, shared_cache: Path
) -> None:  # noqa: ANN001
    wiki = make_wiki({"p.md": page_text("t-invalid", "```cuda runn\n__global__ void k() {}\n```\n")})
    report = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    (record,) = report.records
    assert record.status == "error" and "unknown attribute 'runn'" in record.message and record.line == 8
    assert report.exit_code == 1
    assert [str(p) for p in report.problems] == ["p.md:8: error: cuda block t-invalid:1: unknown attribute 'runn'"]
    again = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    assert again.records[0].record_id == record.record_id  # re-importing adds nothing


def test_compile_only_builds_programs_but_does_not_run_them(
    make_wiki, page_text, toolchain: Toolchain, shared_cache: Path
) -> None:  # noqa: ANN001
    program = "```cpp\nint main() { return 0; }\n```\n"
    wiki = make_wiki({"p.md": page_text("t-compile-only", program)})
    report = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, compile_only=True)
    steps = {r.step: r for r in report.records}
    assert steps["compile"].status == "pass"
    assert steps["run"].status == "skipped" and steps["run"].message == "not run: --compile-only"
    assert report.exit_code == 0


def test_cli_writes_evidence_jsonl_and_exits_1_on_failure(
    make_wiki, page_text, toolchain: Toolchain, shared_cache: Path, tmp_path: Path, repo_root: Path
) -> None:  # noqa: ANN001
    wiki = make_wiki({"k.md": page_text("t-cli", KERNEL + "\n" + BROKEN)})
    report_path = tmp_path / "evidence" / "cli.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "runner",
        "verify",
        "--wiki",
        str(wiki),
        "--report",
        str(report_path),
        "--cache-dir",
        str(shared_cache),
        "--jobs",
        "2",
        "--target",
        "sm_90a",
    ]
    done = subprocess.run(
        cmd,
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ | {"PYTHONPATH": os.pathsep.join([str(repo_root), os.environ.get("PYTHONPATH", "")])},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    records = read_jsonl(report_path)
    assert [(r.snippet_id, r.status) for r in records] == [("t-cli:1", "pass"), ("t-cli:2", "fail")]
    assert "t-cli" in done.stdout and "FAIL t-cli:2 sm_90a compile" in done.stdout
    js = subprocess.run(
        cmd[:-4] + ["--json"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ | {"PYTHONPATH": os.pathsep.join([str(repo_root), os.environ.get("PYTHONPATH", "")])},
    )
    data = json.loads(js.stdout)
    assert data["exit_code"] == 1 and data["builds"] == 0 and data["totals"]["failed"] == 1


def test_runner_imports_without_the_web_stack(repo_root: Path) -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'sqlmodel', 'pydantic', 'pydantic_settings', 'sqlalchemy', 'typer', 'uvicorn'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import runner, runner.verify, runner.__main__, snippets\n"
        "from runner.verify import load_snippets\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_duplicate_page_id_is_left_out_with_the_rule_lint_and_the_index_use(tmp_path: Path) -> None:
    from runner.verify import load_snippets

    (tmp_path / "a.md").write_text("---\nid: a\ntitle: A\narchitectures: [sm_90]\n---\n" + KERNEL)
    (tmp_path / "b.md").write_text("---\ntitle: B\nid: a\n---\n" + KERNEL)
    snippets, problems = load_snippets(tmp_path)
    assert {s.path for s in snippets} == {"a.md"}
    assert [str(p) for p in problems] == ["b.md:3: error: duplicate id 'a': also used by a.md; this page is left out"]
