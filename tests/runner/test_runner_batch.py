"""One nvcc run for all of a block's targets (`verify --compile-only`) gives each target exactly what its own build gives."""

from __future__ import annotations

from pathlib import Path

from runner.evidence import EvidenceRecord
from runner.resources import split_ptxas_report
from runner.toolchain import Toolchain
from runner.verify import verify
from snippets import extract_snippets

PROGRAM = """\
```cuda run sass="FFMA" ptx="fma.rn.f32"
__device__ float axpy(float a, float x, float y) { return a * x + y; }
__global__ void k(float* out, const float* in, float a) {
  __shared__ float tile[64];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = axpy(a, tile[threadIdx.x], 1.0f);
}
int main() { return 0; }
```

```cuda
__global__ void only_hopper_and_later(int* p) {
  asm volatile("fence.proxy.async.shared::cta;");
  p[threadIdx.x] = 0;
}
```

```cuda
__global__ void blackwell_only(int* p) {
  asm volatile("tcgen05.fence::before_thread_sync;");
  p[0] = 1;
}
```
"""

COMPARED = ("status", "error_kind", "error_line", "resources", "checks", "warnings")


def records(toolchain: Toolchain, cache: Path, compile_only: bool) -> dict[tuple[int, str, str], EvidenceRecord]:
    snippets, problems = extract_snippets("t", "t.md", PROGRAM, 1, ["sm90a", "sm100a"])
    assert [p for p in problems if p.severity == "error"] == []
    report = verify(
        ".", snippets=snippets, toolchain=toolchain, cache_dir=cache, gpus=[], use_cache=False, compile_only=compile_only
    )
    return {(int(r.snippet_id.split(":")[1]), r.target, r.step): r for r in report.records if r.step != "run"}


def test_each_target_of_a_shared_build_gets_the_result_of_its_own_build(toolchain: Toolchain, tmp_path: Path) -> None:
    shared = records(toolchain, tmp_path / "a", compile_only=True)  # compile-only: targets share nvcc runs
    alone = records(toolchain, tmp_path / "b", compile_only=False)  # no GPU here: built per target, nothing runs
    assert shared.keys() == alone.keys()
    for key, record in shared.items():
        for name in COMPARED:
            assert getattr(record, name) == getattr(alone[key], name), (key, name)
    program = shared[(1, "sm_90a", "compile")]
    assert program.status == "pass" and program.resources["smem_bytes"] == 256
    assert [c["ok"] for c in shared[(1, "sm_100a", "sass")].checks] == [True]
    # the program and the plain block were each built once for both targets …
    for block in (1, 2):
        assert shared[(block, "sm_90a", "compile")].command.count("-gencode") >= 2
        assert alone[(block, "sm_90a", "compile")].command.split(" && ")[0].count("-gencode") == 1
    # … and a block that fails for one target is built per target, so each keeps its own diagnosis
    hopper, blackwell = shared[(3, "sm_90a", "compile")], shared[(3, "sm_100a", "compile")]
    assert hopper.status == "fail" and hopper.error_kind == "not supported on this target"
    assert blackwell.status == "pass"
    assert hopper.command.count("-gencode") == 1 and blackwell.command.count("-gencode") == 1


REPORT_90 = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function '_Z1kPi' for 'sm_90a'\nptxas info    : Used 8 registers\n"
REPORT_100 = REPORT_90.replace("sm_90a", "sm_100a").replace("8 registers", "10 registers")


def test_the_output_splits_into_one_ptxas_report_per_target_in_gencode_order() -> None:
    assert split_ptxas_report(REPORT_90 + REPORT_100, ["sm_90a", "sm_100a"]) == {"sm_90a": REPORT_90, "sm_100a": REPORT_100}


def test_anything_that_cannot_be_attributed_to_one_target_means_no_split() -> None:
    targets = ["sm_90a", "sm_100a"]
    assert split_ptxas_report(REPORT_90, targets) is None  # one report for two targets
    assert split_ptxas_report(REPORT_100 + REPORT_90, targets) is None  # not in -gencode order
    assert split_ptxas_report('snippet(3): warning #550-D: variable "x" was set\n' + REPORT_90 + REPORT_100, targets) is None
    assert split_ptxas_report(REPORT_90 + "/usr/bin/ld: warning: something\n" + REPORT_100, targets) is None
