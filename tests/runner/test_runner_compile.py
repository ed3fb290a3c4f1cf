"""Compiling snippets with the real nvcc: passes mean the code really was assembled for the target.

Every test shares one session-wide result cache, so a snippet used by two tests is
compiled once (the CI machine has two slow cores).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.evidence import EvidenceRecord
from runner.toolchain import Toolchain
from runner.verify import verify
from snippets import extract_snippets


def check(
    body: str, toolchain: Toolchain, cache: Path, archs: tuple[str, ...] = ("sm90a",), **kwargs: object
) -> dict[tuple[int, str, str], EvidenceRecord]:
    """Verify the blocks of a page body; records by (block number, target, step)."""
    snippets, problems = extract_snippets("t", "t.md", body, 1, list(archs))
    assert [p for p in problems if p.severity == "error"] == []
    report = verify(".", snippets=snippets, toolchain=toolchain, cache_dir=cache, gpus=[], **kwargs)  # type: ignore[arg-type]
    return {(int(r.snippet_id.split(":")[1]), r.target, r.step): r for r in report.records}


VALID = """\
```cuda
__device__ __forceinline__ float square(float x) { return x * x; }
__global__ void scale(float* out, const float* in, int n) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { tile[threadIdx.x] = in[i]; __syncthreads(); out[i] = square(tile[threadIdx.x]); }
}
```
"""


def test_valid_fragment_passes_on_sm90a_with_resources(toolchain: Toolchain, shared_cache: Path) -> None:
    r = check(VALID, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "pass", r.message + r.output
    assert r.toolchain == toolchain.label and r.toolchain.startswith("nvcc 13")
    assert r.resources["registers"] > 0
    assert r.resources["smem_bytes"] == 512
    assert r.resources["spill_store_bytes"] == 0
    assert any(f["name"].startswith("_Z5scale") and f.get("entry") for f in r.resources["functions"])
    assert r.isolation in ("bwrap", "unshare-net", "none")


UNCALLED_HELPER = """\
```cuda
__device__ void helper(unsigned* p) {
  asm volatile("bogus.instruction.b32 [%0];" :: "l"(p));
}
```
"""

STATIC_FORCEINLINE_HELPER = """\
```cuda
#include <cstdint>
static __device__ __forceinline__ void helper(uint32_t* p) {
  asm volatile("st.shared.bogus.b32 [%0], 1;" :: "l"(p));
}
__global__ void unrelated(int* out) { out[0] = 1; }
```
"""


def test_uncalled_device_helper_with_invalid_ptx_fails(toolchain: Toolchain, shared_cache: Path) -> None:
    r = check(UNCALLED_HELPER, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "fail", r.message
    assert r.error_kind == "PTX syntax error"
    assert "bogus" in r.message
    assert r.error_line == 3  # the asm line: fence on line 1, helper on 2, asm on 3


def test_static_forceinline_helper_with_invalid_ptx_fails(toolchain: Toolchain, shared_cache: Path) -> None:
    r = check(STATIC_FORCEINLINE_HELPER, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "fail", r.message
    assert r.error_kind == "PTX syntax error"
    assert r.error_line == 4


@pytest.mark.parametrize(
    "code",
    [
        'struct Helper {\n  __device__ void poke(unsigned* p) const {\n    asm volatile("bogus.member.b32 [%0];" :: "l"(p));\n  }\n};',
        'namespace {\n__device__ inline void poke(unsigned* p) {\n  asm volatile("bogus.anon.b32 [%0];" :: "l"(p));\n}\n}',
        'static __global__ void\nunlaunched(unsigned* p) {\n  asm volatile("bogus.kernel.b32 [%0];" :: "l"(p));\n}',
    ],
    ids=["member-function", "anonymous-namespace-inline", "static-kernel"],
)
def test_other_unused_device_code_with_invalid_ptx_fails(toolchain: Toolchain, shared_cache: Path, code: str) -> None:
    r = check(f"```cuda\n{code}\n```\n", toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "fail", r.message
    assert r.error_kind == "PTX syntax error" and r.error_line == 4


def test_uninstantiated_template_with_asm_is_unverified_not_passed(toolchain: Toolchain, shared_cache: Path) -> None:
    body = '```cuda\ntemplate <int N>\n__device__ void helper(int* p) { asm volatile("bogus.tmpl.b32 [%0];" :: "l"(p)); }\n```\n'
    r = check(body, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "unverified", r.message
    assert r.error_kind == "not assembled" and "bogus.tmpl.b32" in r.message
    assert r.error_line == 3


TCGEN05 = """\
```cuda
#include <cstdint>
__global__ void alloc_tmem(uint32_t* dst) {
  __shared__ uint32_t slot;
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(&slot));
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(addr));
  dst[0] = slot;
}
```
"""


def test_blackwell_only_instruction_fails_on_sm90a_and_passes_on_sm100a(toolchain: Toolchain, shared_cache: Path) -> None:
    records = check(TCGEN05, toolchain, shared_cache, archs=("sm90a", "sm100a"))
    hopper, blackwell = records[(1, "sm_90a", "compile")], records[(1, "sm_100a", "compile")]
    assert hopper.status == "fail"
    assert hopper.error_kind == "not supported on this target"
    assert "tcgen05.alloc" in hopper.message and "sm_90a" in hopper.message
    assert hopper.error_line == 6
    assert blackwell.status == "pass", blackwell.message + blackwell.output


def test_arch_guarded_code_for_other_targets_is_not_reported_unassembled(toolchain: Toolchain, shared_cache: Path) -> None:
    body = (
        "```cuda\n__global__ void k(int* p) {\n#if __CUDA_ARCH__ >= 1000\n"
        '  asm volatile("tcgen05.fence::before_thread_sync;");\n#endif\n  p[0] = 1;\n}\n```\n'
    )
    r = check(body, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "pass", r.message


def test_compile_fail_block_is_xfail_and_a_clean_compile_is_fail(toolchain: Toolchain, shared_cache: Path) -> None:
    body = TCGEN05.replace("```cuda", '```cuda arch=sm_90a compile_fail="not supported on .target"', 1)
    body += "\n" + VALID.replace("```cuda", '```cuda compile_fail="anything"', 1)
    records = check(body, toolchain, shared_cache)
    assert records[(1, "sm_90a", "compile")].status == "xfail"
    clean = records[(2, "sm_90a", "compile")]
    assert clean.status == "fail" and "compiled cleanly" in clean.message


def test_compile_fail_with_the_wrong_message_is_fail(toolchain: Toolchain, shared_cache: Path) -> None:
    body = UNCALLED_HELPER.replace("```cuda", '```cuda compile_fail="not supported on .target"', 1)
    r = check(body, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "fail" and "lacks the expected text" in r.message


def test_sketch_is_unverified_and_never_compiled(toolchain: Toolchain, shared_cache: Path) -> None:
    r = check("```cuda sketch\nthis is { not C++\n```\n", toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "unverified" and r.message.startswith("sketch")
    assert r.duration_s == 0


HELPER = "```cuda id=helpers\n__device__ int twice(int x) { return 2 * x; }\n```\n\n"
USER = "__global__ void k(int* out) { out[threadIdx.x] = twice(threadIdx.x); }\n```\n"


def test_block_depending_on_an_earlier_block_passes_only_when_chained(toolchain: Toolchain, shared_cache: Path) -> None:
    unchained = check(HELPER + "```cuda\n" + USER, toolchain, shared_cache)
    assert unchained[(1, "sm_90a", "compile")].status == "pass"
    alone = unchained[(2, "sm_90a", "compile")]
    assert alone.status == "fail"
    assert alone.error_kind == "undefined identifier"
    assert 'identifier "twice" is undefined' in alone.message
    assert alone.error_line == 6 and "t.md:6" in alone.message
    chained = check(HELPER + "```cuda chain\n" + USER, toolchain, shared_cache)
    assert chained[(2, "sm_90a", "compile")].status == "pass"
    used = check(HELPER + "```cuda uses=helpers\n" + USER, toolchain, shared_cache)
    assert used[(2, "sm_90a", "compile")].status == "pass"


def test_error_in_a_chained_block_maps_to_that_blocks_line(toolchain: Toolchain, shared_cache: Path) -> None:
    body = "```cuda id=a\n__device__ int f() {\n  return missing_value;\n}\n```\n\n```cuda uses=a\n__global__ void k() {}\n```\n"
    records = check(body, toolchain, shared_cache)
    assert records[(1, "sm_90a", "compile")].error_line == 3
    assert records[(2, "sm_90a", "compile")].error_line == 3


def test_ptx_module_is_assembled_and_a_fragment_is_not_verifiable(toolchain: Toolchain, shared_cache: Path) -> None:
    module = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry e(.param .u64 p)\n{\n  .reg .b64 %rd<2>;\n  ld.param.u64 %rd1, [p];\n  ret;\n}\n"
    body = f"```ptx\n{module}```\n\n```ptx\n{module.replace('ret;', 'bogus.op;')}```\n\n```ptx\nadd.s32 %r1, %r2, %r3;\n```\n"
    records = check(body, toolchain, shared_cache)
    assert records[(1, "sm_90a", "compile")].status == "pass"
    bad = records[(2, "sm_90a", "compile")]
    assert bad.status == "fail" and bad.error_line == 21  # `bogus.op;` is module line 8 of the block at line 13
    fragment = records[(3, "sm_90a", "compile")]
    assert fragment.status == "unverified" and "PTX fragment: not a complete module" in fragment.message


def test_python_and_host_cpp_blocks(toolchain: Toolchain, shared_cache: Path) -> None:
    body = (
        "```python\nimport math\nprint(math.pi)\n```\n\n```python\ndef f(:\n    pass\n```\n\n"
        '```cpp\nint host_only(int x) { return x + 1; }\n```\n\n```c++\nint broken() { return "x"; }\n```\n'
    )
    records = check(body, toolchain, shared_cache)
    assert records[(1, "sm_90a", "compile")].status == "syntax-ok"  # only byte-compiled: never "pass"
    bad_py = records[(2, "sm_90a", "compile")]
    assert bad_py.status == "fail" and bad_py.error_kind == "Python syntax error" and bad_py.error_line == 7
    assert records[(3, "sm_90a", "compile")].status == "pass"
    bad_cpp = records[(4, "sm_90a", "compile")]
    assert bad_cpp.status == "fail" and bad_cpp.error_line == 16
    assert bad_cpp.error_kind == "host compile error"


PROGRAM = """\
```cuda run output="sum=6"
__global__ void add(int* p) { atomicAdd(p, (int)threadIdx.x); }
int main() {
  int* d; cudaMalloc(&d, sizeof(int)); cudaMemset(d, 0, sizeof(int));
  add<<<1, 4>>>(d);
  int h = 0; cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("sum=%d\\n", h);
  return h == 6 ? 0 : 1;
}
```
"""


def test_program_without_a_matching_gpu_is_built_and_skipped(toolchain: Toolchain, shared_cache: Path) -> None:
    records = check(PROGRAM, toolchain, shared_cache, archs=("sm90a", "sm100a"), compile_only=False)
    assert records[(1, "sm_90a", "compile")].status == "pass"
    assert records[(1, "sm_90a", "run")].status == "skipped"
    assert records[(1, "sm_90a", "run")].message == "not run: no sm_90 device here"
    assert records[(1, "sm_100a", "run")].message == "not run: no sm_100 device here"
    # the relocatable build compiles the device code alone; the whole-program build compiles and links the host code
    relocatable, program = records[(1, "sm_90a", "compile")].command.split(" && ")
    assert "-rdc=true" in relocatable and "-cubin" in relocatable and " -c " not in relocatable
    assert "-rdc=true" not in program and program.endswith("-o snippet")


def test_an_error_in_a_programs_host_code_is_found_by_its_device_only_relocatable_build(
    toolchain: Toolchain, shared_cache: Path
) -> None:
    body = "```cuda run\n__global__ void k(int* p) { p[0] = 1; }\nint main() {\n  return not_declared();\n}\n```\n"
    r = check(body, toolchain, shared_cache)[(1, "sm_90a", "compile")]
    assert r.status == "fail" and r.error_kind == "undefined identifier", r.message
    assert 'identifier "not_declared" is undefined' in r.message and r.error_line == 4
    assert "-cubin" in r.command


def test_sass_checks_pass_fail_or_are_skipped_never_passed_without_the_tool(toolchain: Toolchain, shared_cache: Path) -> None:
    body = (
        VALID.replace("```cuda", '```cuda sass="FMUL" no_sass="HGMMA"', 1)
        + "\n"
        + VALID.replace("```cuda", '```cuda sass="UTMALDG"', 1)
    )
    records = check(body, toolchain, shared_cache)
    good, bad = records[(1, "sm_90a", "sass")], records[(2, "sm_90a", "sass")]
    if toolchain.sass_tool is None:
        assert good.status == bad.status == "skipped"
        assert "not found" in good.message
    else:
        assert good.status == "pass", good.message
        assert bad.status == "fail" and "UTMALDG" in bad.message


def test_ptx_checks_apply_to_the_generated_ptx(toolchain: Toolchain, shared_cache: Path) -> None:
    body = (
        VALID.replace("```cuda", '```cuda ptx="mul\\.f32" no_ptx="ld\\.local"', 1)
        + "\n"
        + VALID.replace("```cuda", '```cuda ptx="wgmma"', 1)
    )
    records = check(body, toolchain, shared_cache)
    assert records[(1, "sm_90a", "compile")].status == "pass"
    failed = records[(2, "sm_90a", "compile")]
    assert failed.status == "fail" and failed.error_kind == "ptx check failed"
    assert failed.checks == [{"kind": "ptx", "pattern": "wgmma", "ok": False, "detail": "no match"}]


@pytest.mark.parametrize("flags", ['flags="-O3 -DSCALE=3 -std=c++20"'])
def test_allowed_flags_reach_nvcc(toolchain: Toolchain, shared_cache: Path, flags: str) -> None:
    body = f"```cuda {flags}\nstatic_assert(SCALE == 3);\n__global__ void k(int* p) {{ p[0] = SCALE; }}\n```\n"
    assert check(body, toolchain, shared_cache)[(1, "sm_90a", "compile")].status == "pass"
