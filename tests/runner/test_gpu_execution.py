"""Running programs on a real GPU: pass, wrong result, spinning kernel, crash, huge output, leftover
processes, and an illegal address that must not affect the next snippet.

Marked `gpu`; skipped cleanly where no NVIDIA GPU is present. Each test builds its programs with the
real nvcc for the local GPU's architecture (sm_90a on an H100/H200, sm_100a on a B200).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runner.evidence import EvidenceRecord
from runner.gpus import Gpu, discover_gpus
from runner.toolchain import Toolchain
from runner.verify import verify
from snippets import extract_snippets
from tests.ci import missing_gpu, require_cupy
from tests.runner.processes import gone

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu() -> Gpu:
    gpus = discover_gpus()
    if not gpus:
        missing_gpu("no NVIDIA GPU here")
    return gpus[0]


@pytest.fixture(scope="module")
def arch(gpu: Gpu) -> str:
    """Page architecture for the local GPU: 9.0 → sm90a, 10.0 → sm100a, 8.9 → sm89."""
    major, minor = gpu.compute_capability.split(".")
    return f"sm{major}{minor}" + ("a" if int(major) >= 9 else "")


def run(body: str, toolchain: Toolchain, arch: str, cache: Path, **kwargs: object) -> dict[tuple[int, str], EvidenceRecord]:
    """Verify a page body for the local GPU; records by (block number, step)."""
    snippets, problems = extract_snippets("g", "g.md", body, 1, [arch])
    assert [p for p in problems if p.severity == "error"] == []
    report = verify(".", snippets=snippets, toolchain=toolchain, cache_dir=cache, use_cache=False, **kwargs)  # type: ignore[arg-type]
    return {(int(r.snippet_id.split(":")[1]), r.step): r for r in report.records}


def _leftover_programs() -> list[int]:
    """Processes still running a built snippet (`./snippet` in a kw-run- folder)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[0]
            cwd = os.readlink(f"/proc/{name}/cwd")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cmd == b"./snippet" or "kw-run-" in cwd):
            pids.append(int(name))
    return pids


CHECKED_ADD = r"""
```cuda run output="all 4096 ok"
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 4096;
  float *a, *b, *c;
  cudaMallocManaged(&a, n * sizeof(float)); cudaMallocManaged(&b, n * sizeof(float)); cudaMallocManaged(&c, n * sizeof(float));
  for (int i = 0; i < n; ++i) { a[i] = i; b[i] = 2 * i; }
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(err)); return 2; }
  for (int i = 0; i < n; ++i) if (c[i] != EXPECTED) { printf("mismatch at %d: %f\n", i, c[i]); return 1; }
  printf("all %d ok\n", n);
  return 0;
}
```
"""


def test_program_that_checks_its_result_passes_on_the_gpu(toolchain: Toolchain, shared_cache: Path, gpu: Gpu, arch: str) -> None:
    records = run(CHECKED_ADD.replace("EXPECTED", "3.0f * i"), toolchain, arch, shared_cache)
    r = records[(1, "run")]
    assert r.status == "pass", r.message + r.output
    assert r.output.strip() == "all 4096 ok"
    assert (r.gpu_name, r.compute_capability) == (gpu.name, gpu.compute_capability)
    assert r.driver_version and r.exit_code == 0
    assert r.checks == [{"kind": "output", "pattern": "all 4096 ok", "ok": True, "detail": "found"}]
    assert records[(1, "compile")].resources["registers"] > 0


def test_wrong_result_fails_with_the_programs_message(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    r = run(CHECKED_ADD.replace("EXPECTED", "3.0f * i + 1"), toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "fail" and r.exit_code == 1
    assert r.message.startswith("non-zero exit status: exit status 1: mismatch at 0")


def test_expected_output_missing_is_a_failure(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    body = CHECKED_ADD.replace("EXPECTED", "3.0f * i").replace('output="all 4096 ok"', 'output="all 4097 ok"')
    r = run(body, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "fail" and r.error_kind == "wrong output" and r.exit_code == 0


SPIN = r"""
```cuda run timeout=5
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
int main() {
  int* flag; cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0, sizeof(int));
  spin<<<1, 1>>>(flag);
  cudaDeviceSynchronize();
  return 0;
}
```
"""

GOOD = r"""
```cuda run output="good"
__global__ void one(int* p) { *p = 1; }
int main() {
  int* d; cudaMalloc(&d, sizeof(int)); one<<<1, 1>>>(d);
  int h = 0; cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  if (h != 1) { printf("bad %d\n", h); return 1; }
  printf("good\n");
  return 0;
}
```
"""


def test_spinning_kernel_times_out_and_leaves_no_processes(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    started = time.monotonic()
    r = run(SPIN, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "timeout", r.message + r.output
    assert 5 <= r.duration_s < 20
    assert time.monotonic() - started < 240
    assert gone(_leftover_programs) == []
    assert run(GOOD, toolchain, arch, shared_cache)[(1, "run")].status == "pass"


def test_host_crash_is_a_failure_naming_the_signal(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    body = "```cuda run\nint main() { cudaFree(0); volatile int* p = nullptr; *p = 1; return 0; }\n```\n"
    r = run(body, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "fail" and r.error_kind == "crashed"
    assert "SIGSEGV" in r.message and r.exit_code == -11


def test_huge_output_is_capped_and_the_program_still_passes(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    body = '```cuda run\nint main() { cudaFree(0); for (int i = 0; i < 5000000; ++i) printf("line %d of a lot of output\\n", i); return 0; }\n```\n'
    r = run(body, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "pass", r.message
    assert r.output_truncated and "lines omitted]" in r.output
    assert len(r.output) < 100_000
    assert r.output.rstrip().endswith("line 4999999 of a lot of output")


def test_leftover_child_processes_are_killed(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    body = (
        "```cuda run\n#include <unistd.h>\n"
        'int main() { cudaFree(0); if (fork() == 0) { setsid(); sleep(600); return 0; } printf("parent done\\n"); return 0; }\n```\n'
    )
    r = run(body, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "pass", r.message
    assert "left 1 process(es) behind (killed)" in r.message
    assert gone(_leftover_programs) == []


ILLEGAL = r"""
```cuda run
__global__ void poke(int* p) { p[threadIdx.x] = 42; }
int main() {
  poke<<<1, 32>>>(reinterpret_cast<int*>(0x10));
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err)); return 3; }
  return 0;
}
```
"""


def test_illegal_address_fails_and_the_next_snippet_still_passes(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    bad = run(ILLEGAL, toolchain, arch, shared_cache)[(1, "run")]
    assert bad.status == "fail" and bad.exit_code == 3
    assert "illegal" in bad.message.lower()
    good = run(GOOD, toolchain, arch, shared_cache)[(1, "run")]
    assert good.status == "pass", good.message + good.output


def test_gpu_program_for_another_architecture_is_skipped(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    other = "sm100a" if arch != "sm100a" else "sm90a"
    body = GOOD.replace("```cuda run", f"```cuda run arch={other}", 1)
    records = run(body, toolchain, arch, shared_cache)
    target = "sm_" + other[2:]
    assert records[(1, "compile")].target == target
    assert records[(1, "run")].status == "skipped"
    assert records[(1, "run")].message == f"not run: no {target.removesuffix('a')} device here"


def test_python_block_runs_with_cupy(toolchain: Toolchain, shared_cache: Path, arch: str) -> None:
    require_cupy()
    body = "```python\nimport cupy as cp\n\ndef main():\n    x = cp.arange(10)\n    assert int(x.sum()) == 45\n    print('cupy ok')\n\nif __name__ == '__main__':\n    main()\n```\n"
    r = run(body, toolchain, arch, shared_cache)[(1, "run")]
    assert r.status == "pass", r.message + r.output
    assert "cupy ok" in r.output
