"""The runner's trust boundary through the NVRTC path (runner/nvrtc.py): CUDA 12.x device-only builds, where NVRTC
is a library loaded by a few lines of Python (`DRIVER`) inside the same sandbox as nvcc, and the release's ptxas
turns its PTX into a cubin. The nvcc path is attacked in test_sandbox_hostile.py and test_trust_boundary.py; here
the same attacks go through the real CUDA 12.9 wheels (KERNELWIKI_TOOLCHAINS; `make toolchains` installs them;
skipped without them, a failure under CI=true) and real bubblewrap:

* a block whose source includes a host file (absolute, `../../`) or the compiler's own /proc/self/environ, and
  whose flags define a macro spelling a path: the file is not there inside the sandbox, and no byte of it or of
  the runner's environment reaches the evidence;
* code running where NVRTC or ptxas runs (what a crafted source that broke the compiler could do): it forges the
  source and plants a symlink at every file the runner reads back (the PTX, the cubins) to the runner's
  environment or to a root-only host file: the result is refused, never published, never passed.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

import runner.nvrtc
from runner.artifacts import ArtifactStore
from runner.sandbox import ISOLATION_BWRAP, isolation_problem
from runner.toolchain import Toolchain
from runner.toolchains import select_toolchain
from runner.verify import verify
from tests.ci import missing_tool

TOKEN = "KW-TOKEN-nvrtc-hostile-3b7a"
CANARY = "KW-CANARY-NVRTC-ROOT-ONLY-51e0"
RELEASE = "12.9"


@pytest.fixture(autouse=True, scope="module")
def _needs_bwrap() -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        missing_tool(f"bubblewrap unusable here: {problem}")


@pytest.fixture()
def nvrtc_toolchain(nvrtc_root: Path) -> Toolchain:
    tc = select_toolchain(RELEASE, nvrtc_root)
    assert tc.nvrtc and tc.ptxas and not tc.nvcc  # the device-only NVRTC path, not nvcc
    return tc


@pytest.fixture()
def canary(tmp_path: Path) -> Path:
    """A root-only file outside anything the sandbox shows."""
    folder = tmp_path / "secret"
    folder.mkdir(mode=0o700)
    path = folder / "canary.h"
    path.write_text(f'const char* kCanary = "{CANARY}";\n')
    path.chmod(0o600)
    return path


def _wiki(tmp_path: Path, body: str) -> Path:
    root = tmp_path / "wiki"
    root.mkdir()
    page = f"---\nid: hostile\ntitle: Hostile\ntype: concept\narchitectures: [sm90a]\n---\n\n{body}"
    (root / "hostile.md").write_text(page, encoding="utf-8")
    return root


def _published(report: object, store: ArtifactStore | None = None) -> str:
    """Everything a verification publishes: its records as JSON, and the artifacts it kept."""
    text = json.dumps([r.to_dict() for r in report.records])  # type: ignore[attr-defined]
    if store is not None and store.root.exists():
        text += "".join(p.read_bytes().decode("latin-1") for p in store.root.rglob("*") if p.is_file())
    return text


def _assert_no_secret(text: str) -> None:
    assert TOKEN not in text
    assert CANARY not in text


def test_a_block_that_includes_host_files_and_the_compilers_environment_gets_none_of_them(
    tmp_path: Path, canary: Path, nvrtc_toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", TOKEN)  # the runner's own environment
    relative = os.path.relpath(canary, "/tmp/kw-nvrtc-x")  # from a build folder: ../../…
    body = "".join(
        f'```cuda compile\n#include "{name}"\n__global__ void k{i}() {{}}\n```\n\n'
        for i, name in enumerate((str(canary), relative, "/proc/self/environ", "/proc/1/environ"))
    )
    body += f'```cuda compile flags="-DKW_PATH=\\"{canary}\\""\n#include KW_PATH\n__global__ void k9() {{}}\n```\n'
    wiki = _wiki(tmp_path, body)
    report = verify(wiki, toolchain=nvrtc_toolchain, cache_dir=tmp_path / "cache", use_cache=False, isolation=ISOLATION_BWRAP)
    compiles = [r for r in report.records if r.step == "compile"]
    assert len(compiles) == 5, [r.to_dict() for r in report.records]
    for record in compiles:
        assert record.toolchain.startswith("nvrtc 12.9"), record.toolchain  # it went through the NVRTC path
    for record in compiles[:4]:
        assert record.isolation == ISOLATION_BWRAP
        assert record.status == "fail", (record.snippet_id, record.status, record.message)
        assert record.command.startswith("nvrtc(snippet.cu "), record.command
    for record in compiles[:2]:  # the host file is not there inside the sandbox
        assert "cannot open source file" in record.output, record.output
    flags = compiles[4]  # a flag spelling a path never reaches NVRTC: outside the flags vocabulary
    assert flags.status == "error" and flags.error_kind == "invalid block" and not flags.command, flags.to_dict()
    _assert_no_secret(_published(report))


_SYMLINKS = (
    "import os\n"
    "for name in ('keep/snippet.ptx', 'keep/snippet.cubin', 'keep/program.ptx', 'keep/program.cubin'):\n"
    "    if os.path.exists(name):\n"
    "        os.remove(name)\n"
    "        os.symlink('/proc/self/environ' if name.endswith('.ptx') else CANARY_PATH, name)\n"
)


def _hostile_driver(canary: Path) -> str:
    """runner.nvrtc.DRIVER, then what code running inside it could do: forge the source, plant symlinks."""
    forge = "try:\n    open('snippet.cu', 'w').write('__global__ void forged() {}\\n')\nexcept OSError:\n    pass\n"
    return (
        f"CANARY_PATH = {str(canary)!r}\n"
        + forge
        + "try:\n    exec(compile(REAL, 'driver', 'exec'))\nfinally:\n"
        + "".join("    " + line + "\n" for line in _SYMLINKS.splitlines())
    ).replace("REAL", repr(runner.nvrtc.DRIVER))


def _hostile_ptxas(tmp_path: Path, real: str, canary: Path) -> str:
    """A ptxas that runs the real one, then plants a symlink at every file the runner reads back."""
    script = tmp_path / "tools" / "ptxas"
    script.parent.mkdir(parents=True)
    # The paths are assembled at run time: the runner binds the folders of files a tool's wrapper script names.
    script.write_text(
        "#!/bin/sh\n"
        "printf '__global__ void forged() {}\\n' > snippet.cu 2>/dev/null\n"
        f'{real} "$@"\n'
        "rc=$?\n"
        "p=/proc; c=" + str(canary.parent) + "\n"
        "for f in keep/*; do\n"
        '  case "$f" in *.ptx) ln -sf "$p/self/environ" "$f" ;; *) ln -sf "$c/canary.h" "$f" ;; esac\n'
        "done\n"
        "exit $rc\n"
    )
    script.chmod(0o755)
    return str(script)


_PROGRAM = (
    '```cuda run sass="FFMA"\n'
    "__global__ void axpy(float a, const float* x, float* y) { y[threadIdx.x] = a * x[threadIdx.x] + y[threadIdx.x]; }\n"
    "int main() { axpy<<<1, 32>>>(2.0f, nullptr, nullptr); return 0; }\n"
    "```\n"
)


def test_code_running_inside_nvrtc_gets_nothing_back_and_passes_nothing(
    tmp_path: Path, canary: Path, nvrtc_toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", TOKEN)
    monkeypatch.setattr(runner.nvrtc, "DRIVER", _hostile_driver(canary))
    store = ArtifactStore(tmp_path / "art")
    report = verify(
        _wiki(tmp_path, _PROGRAM),
        toolchain=nvrtc_toolchain,
        cache_dir=tmp_path / "cache",
        use_cache=False,
        isolation=ISOLATION_BWRAP,
        compile_only=True,
        artifacts=store,
    )
    compile_ = next(r for r in report.records if r.step == "compile")
    assert compile_.toolchain.startswith("nvrtc 12.9")
    assert compile_.status in ("fail", "error"), compile_.to_dict()
    assert "NVRTC reported success but wrote no PTX" in compile_.message or "tampered" in compile_.error_kind, compile_.message
    assert all(r.status != "pass" for r in report.records), [r.to_dict() for r in report.records]
    _assert_no_secret(_published(report, store))


def test_code_running_inside_ptxas_gets_nothing_back_and_passes_nothing(
    tmp_path: Path, canary: Path, nvrtc_toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", TOKEN)
    hostile = replace(nvrtc_toolchain, ptxas=_hostile_ptxas(tmp_path, nvrtc_toolchain.ptxas or "ptxas", canary))
    store = ArtifactStore(tmp_path / "art")
    report = verify(
        _wiki(tmp_path, _PROGRAM),
        toolchain=hostile,
        cache_dir=tmp_path / "cache",
        use_cache=False,
        isolation=ISOLATION_BWRAP,
        compile_only=True,
        artifacts=store,
    )
    records = {r.step: r for r in report.records}
    assert records["compile"].toolchain.startswith("nvrtc 12.9")
    assert records["compile"].status == "error", records["compile"].to_dict()
    assert "ptxas reported success but its cubin keep/snippet.cubin could not be read back" in records["compile"].message
    assert records["sass"].status != "pass", records["sass"].to_dict()
    _assert_no_secret(_published(report, store))
