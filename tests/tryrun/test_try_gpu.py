"""Try runs on a GPU node (marked `gpu`; skipped where no NVIDIA GPU is present): a program is built and run on the
local pool, its run streamed (`running`) and charged as GPU seconds, and a hostile program stays in the sandbox.

On the H200: `KERNELWIKI_CGROUP=require python3 -m pytest tests/tryrun/test_try_gpu.py -m gpu -q -rs`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from runner.gpus import Gpu, discover_gpus
from tests.tryrun.conftest import TryClient, events_of

pytestmark = pytest.mark.gpu

SECRET = "KW-TRY-GPU-RUNNER-TOKEN-41c9"


@pytest.fixture(scope="module")
def gpu() -> Gpu:
    gpus = discover_gpus()
    if not gpus:
        pytest.skip("no NVIDIA GPU here")
    return gpus[0]


def _target(gpu: Gpu) -> str:
    major, minor = gpu.compute_capability.split(".")
    return f"sm_{major}{minor}" + ("a" if major == "9" else "")


def test_a_program_runs_on_the_gpu_streams_running_and_is_charged_its_gpu_seconds(gpu: Gpu, tried: TryClient) -> None:
    token = tried.token("gpu-user")
    program = (
        "#include <cstdio>\n__global__ void k(int* out) { *out = 42; }\n"
        "int main() { int* d; int h = 0; cudaMalloc(&d, sizeof(int)); k<<<1, 1>>>(d);\n"
        '  cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost); std::printf("got %d\\n", h); return h == 42 ? 0 : 1; }\n'
    )
    answer = tried.post(
        {"source": program, "lang": "cuda", "targets": [_target(gpu)], "attributes": 'run output="got 42"'}, token
    )
    events = events_of(answer)
    assert [name for name, _ in events] == ["queued", "compiling", "running", "done"]
    result = events[-1][1]["run"]["result"]
    run = next(r for r in result["records"] if r["step"] == "run")
    assert run["status"] == "pass" and run["gpu_name"] == gpu.name and "got 42" in run["output"]
    assert result["compile_only"] is None and result["gpu_seconds"] > 0
    with tried.service.engine.connect() as conn:
        charged = conn.execute(text("SELECT gpu_seconds FROM try_result WHERE token_name = 'gpu-user'")).scalar()
    assert charged == pytest.approx(result["gpu_seconds"])


def test_a_hostile_program_reads_no_host_secret_at_run_time(gpu: Gpu, tried: TryClient, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", SECRET)
    token = tried.token("eve")
    program = r"""
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
__global__ void k() {}
static void dump(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::printf("cannot open %s\n", path); return; }
  char buf[4096]; size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) std::fwrite(buf, 1, n, stdout);
  std::fclose(f);
}
int main() {
  cudaFree(0); k<<<1, 1>>>(); cudaDeviceSynchronize();
  dump("/etc/shadow"); dump("/proc/1/environ"); dump("/proc/self/environ");
  const char* t = std::getenv("KERNELWIKI_RUNNER_TOKEN"); std::printf("token=%s\n", t ? t : "(none)");
  return 0;
}
"""
    answer = tried.post({"source": program, "lang": "cuda", "targets": [_target(gpu)], "attributes": "run"}, token)
    done = events_of(answer)[-1][1]
    stored = json.dumps(tried.http.get(f"/api/try/{done['id']}").json())
    for text_ in (answer.text, stored):
        assert SECRET not in text_
    run = next(r for r in done["run"]["result"]["records"] if r["step"] == "run")
    assert "cannot open /etc/shadow" in run["output"] and "token=(none)" in run["output"]
