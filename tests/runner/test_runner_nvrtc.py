"""CUDA C++ with a 12.x toolchain through NVRTC (runner/nvrtc.py): device code only, with a real 12.9 wheel.

The host-code removal is checked on text; the builds use CUDA 12.9's NVRTC, ptxas and runtime headers
installed into KERNELWIKI_TOOLCHAINS (default .kernelwiki/toolchains; `make toolchains` installs them, pip's
cache makes a second install cheap). Without them: skipped here, a failure in CI (CI=true).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runner.artifacts import ArtifactStore
from runner.matrix import UNSUPPORTED, MatrixCell, known_good, run_matrix
from runner.nvrtc import NVRTC_UNSUPPORTED, device_only, launched_templates
from runner.toolchains import MANIFEST, install_toolchain, packages_for, select_toolchain
from runner.verify import verify

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "nvrtc_wiki"
RELEASE = "12.9"


def test_host_functions_and_variables_are_blanked_and_every_line_keeps_its_number():
    source = (
        "#include <vector>\n"
        'static const char* kName = R"(a { brace\n in a raw string)";\n'
        "constexpr int kTile = 64;\n"
        "const int kWarps = 4;\n"
        "__constant__ float kScale[2] = {1.0f, 2.0f};\n"
        "struct Stats { std::vector<double> v; double mean() const { return 0; } __device__ int id() { return 1; } };\n"
        "template <class T> __device__ T twice(T x) { return x + x; }\n"
        "__host__ __device__ int both(int x) { return x; }\n"
        "namespace kw { int host_only(int x) { return x; } __global__ void k() {} }\n"
        "int main() {\n  kw::k<<<1, 1>>>();\n  return 0;\n}\n"
    )
    text, removed = device_only(source)
    assert text.count("\n") == source.count("\n") and len(text) == len(source)
    assert removed == ["kName", "v", "mean", "host_only", "main"]
    for kept in (
        "constexpr int kTile",
        "const int kWarps",
        "__constant__ float kScale",
        "__device__ int id()",
        "template <class T> __device__ T twice",
        "__host__ __device__ int both",
        "__global__ void k() {}",
    ):
        assert kept in text, kept
    for gone in ("kName", "std::vector", "mean()", "host_only", "main", "<<<"):
        assert gone not in text, gone


def test_kernel_templates_launched_by_host_code_become_name_expressions():
    host = "wgmma_loop<true><<<grid, 256>>>(a);\nif (x) ns::k<64, float> <<<1, 32, 0, s>>>(b);\nplain<<<1, 1>>>();"
    assert launched_templates(host) == ["wgmma_loop<true>", "ns::k<64,float>"]


def test_a_12x_release_installs_nvrtc_and_the_runtime_headers_beside_ptxas():
    assert packages_for("12.9") == [
        "nvidia-cuda-nvcc-cu12==12.9.*",
        "nvidia-cuda-nvrtc-cu12==12.9.*",
        "nvidia-cuda-runtime-cu12==12.9.*",
    ]


def test_a_12x_install_made_before_nvrtc_is_completed_not_taken_as_installed(tmp_path):
    folder = tmp_path / RELEASE
    folder.mkdir()
    manifest = {"release": RELEASE, "packages": {"nvidia-cuda-nvcc-cu12": "12.9.86"}, "bytes_on_disk": 1, "seconds": 1}
    (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    result = install_toolchain(RELEASE, tmp_path, pip_args=["--no-index", "--no-cache-dir", "--find-links", str(tmp_path)])
    assert not result.already and "nvidia-cuda-nvrtc-cu12==12.9.*" in result.error  # pip was asked for the missing wheels


def test_cuda_blocks_build_device_only_with_nvrtc_and_say_what_was_not_built(tmp_path, nvrtc_root):
    wiki = tmp_path / "wiki"
    shutil.copytree(FIXTURE, wiki)
    tc = select_toolchain(RELEASE, nvrtc_root)
    assert tc.label == "nvrtc 12.9.86 (device only)" and not tc.nvcc
    report = verify(wiki, toolchain=tc, cache_dir=tmp_path / "cache", compile_only=False)
    steps = {(r.snippet_id, r.step): r for r in report.records}
    program = steps[("nvrtc-device-only:1", "compile")]
    assert program.status == "pass", program.output
    assert program.toolchain == "nvrtc 12.9.86 (device only)"
    assert program.message.startswith("NVRTC device-only build (CUDA 12.9): device code only; host code not built: ")
    assert "kNames" in program.message and "total" in program.message and "main" in program.message
    assert program.command.startswith("nvrtc(snippet.cu --gpu-architecture=compute_90a")
    assert "ptxas" in program.command and program.resources.get("registers")
    assert steps[("nvrtc-device-only:1", "sass")].status == "pass"  # FFMA in the instantiated axpy<true>/<false>
    run = steps[("nvrtc-device-only:1", "run")]
    assert run.status == "skipped" and "has no host program" in run.message
    assert steps[("nvrtc-device-only:2", "compile")].status == "xfail"  # ptxas 12.9: no tcgen05 on sm_90a
    libcu = steps[("nvrtc-device-only:3", "compile")]
    assert libcu.status == "skipped" and libcu.error_kind == NVRTC_UNSUPPORTED and "<cuda/barrier>" in libcu.message


def test_matrix_cells_of_a_12x_release_are_real_statuses_with_kept_sass(tmp_path, nvrtc_root):
    wiki = tmp_path / "wiki"
    shutil.copytree(FIXTURE, wiki)
    store = ArtifactStore(tmp_path / "art")
    report = run_matrix(wiki, [RELEASE], nvrtc_root, store=store, cache_dir=tmp_path / "cache")
    cells = {c.snippet_id: c for c in report.cells}
    assert cells["nvrtc-device-only:1"].status == "pass" and cells["nvrtc-device-only:1"].sass_check == "pass"
    assert "FFMA" in (store.get(cells["nvrtc-device-only:1"].sass or "") or "")
    assert cells["nvrtc-device-only:1"].message.startswith("NVRTC device-only build")
    assert cells["nvrtc-device-only:2"].status == "xfail"
    assert cells["nvrtc-device-only:3"].status == UNSUPPORTED and "libcu++" in cells["nvrtc-device-only:3"].message


def test_the_known_good_line_says_which_releases_built_device_code_only():
    def cell(release: str, label: str) -> MatrixCell:
        return MatrixCell("p:1", "p", "sm_90a", release, label, "h", "run", "cuda", "pass")

    line = known_good(
        [cell("12.8", "nvrtc 12.8.93 (device only)"), cell("12.9", "nvrtc 12.9.86 (device only)"), cell("13.0", "nvcc 13.0.88")]
    )
    assert line == "known good: CUDA 12.8–13.0 · 12.8–12.9: device code only (NVRTC)"
