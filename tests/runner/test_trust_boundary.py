"""The runner's trust boundary, attacked as issue 21 did (real bubblewrap, real nvcc; CI).

A page editor chooses a block's text and attributes; whoever can write a queue
job chooses the whole snippet. Neither may make the runner read a host file
into evidence, pass a block for text that is not the page's, hang on a regex, or
fill memory or disk past the sandbox's caps. Each attack goes through every
entry point the issue names: `python -m runner verify`, the multi-target
compile-only path (runner/batch.py), and the queue worker's verify function.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.compile import TAMPERED, build_snippet
from runner.coverage import regex_checks
from runner.sandbox import (
    ISOLATION_BWRAP,
    SANDBOX_SHM_BYTES,
    SANDBOX_TMP_BYTES,
    SNIPPET_FOLDER_BYTES,
    isolation_problem,
    new_workdir,
    remove_workdir,
    run_process,
)
from runner.toolchain import Toolchain
from runner.verify import verify
from snippets.extract import content_hash
from snippets.snippet import Snippet
from tests.ci import missing_tool

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "KW-TOKEN-trust-boundary-5f1e"
CANARY = "KW-CANARY-ROOT-ONLY-9c2d"

ISSUE_FENCE = (
    '```cuda compile flags="-DX=$(ln${IFS}-sf${IFS}/proc/self/environ${IFS}keep/0.ptx)" '
    'ptx="KERNELWIKI_RUNNER_TOKEN=[^\\x00]*"\n__global__ void j4() {}\n```\n'
)


@pytest.fixture(autouse=True, scope="module")
def _needs_bwrap() -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        missing_tool(f"bubblewrap unusable here: {problem}")


@pytest.fixture()
def canary(tmp_path: Path) -> Path:
    """A root-only file outside anything the sandbox shows."""
    folder = tmp_path / "secret"
    folder.mkdir(mode=0o700)
    path = folder / "canary.txt"
    path.write_text(CANARY + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture()
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", TOKEN)


def _page(body: str, archs: str = "[sm90a]") -> str:
    return f"---\nid: hostile\ntitle: Hostile\ntype: concept\narchitectures: {archs}\n---\n\n{body}"


def _wiki(tmp_path: Path, body: str, archs: str = "[sm90a]") -> Path:
    root = tmp_path / "wiki"
    root.mkdir()
    (root / "hostile.md").write_text(_page(body, archs), encoding="utf-8")
    return root


def _assert_no_secret(text: str) -> None:
    assert TOKEN not in text
    assert CANARY not in text


def _hostile_nvcc(tmp_path: Path, real_nvcc: str, canary: Path) -> str:
    """An nvcc that runs code at compile time (what the issue's flags= did): it tries to forge the source, runs the
    real nvcc, then plants a symlink at every file the runner reads back (to the runner's own environment and to a
    root-only file)."""
    bindir = tmp_path / "tools" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "nvcc"
    # The paths are assembled at run time: the runner binds the folders of files a tool's wrapper script names.
    script.write_text(
        "#!/bin/sh\n"
        "printf '__global__ void forged() {}\\n' > snippet.cu 2>/dev/null\n"
        f'{real_nvcc} "$@"\n'
        "rc=$?\n"
        "p=/proc; c=" + str(canary.parent) + "\n"
        "for f in keep/* keep-program/* snippet snippet.o; do\n"
        '  if [ -e "$f" ]; then\n'
        '    case "$f" in *.ptx) ln -sf "$p/self/environ" "$f" ;; *) ln -sf "$c/canary.txt" "$f" ;; esac\n'
        "  fi\n"
        "done\n"
        "exit $rc\n"
    )
    script.chmod(0o755)
    return str(script)


# ---------------------------------------------------------------------------------------------------------------------
# The issue's fence: flags that reach a shell, a symlink to the runner's environment, a regex that copies the token.


def test_the_issues_fence_is_a_lint_error_naming_flags(tmp_path: Path) -> None:
    wiki = _wiki(tmp_path, ISSUE_FENCE)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kernelwiki"), "lint", "--wiki", str(wiki)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "flags=" in done.stdout + done.stderr
    assert "not allowed" in done.stdout + done.stderr


def test_the_issues_fence_through_python_m_runner_verify_publishes_nothing(
    tmp_path: Path, canary: Path, toolchain: Toolchain
) -> None:
    wiki = _wiki(tmp_path, ISSUE_FENCE)
    out = tmp_path / "evidence.jsonl"
    env = dict(os.environ, KERNELWIKI_RUNNER_TOKEN=TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "runner", "verify", "--wiki", str(wiki), "--compile-only", "--no-cache"]
        + ["--cache-dir", str(tmp_path / "cache"), "--report", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    _assert_no_secret(done.stdout + done.stderr)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["status"] == "error" for r in records), records
    assert "flags=" in records[0]["message"]
    _assert_no_secret(out.read_text())


def test_compile_time_symlinks_through_python_m_runner_verify_publish_nothing(
    tmp_path: Path, canary: Path, toolchain: Toolchain
) -> None:
    wiki = _wiki(tmp_path, _SYMLINK_BODY)
    out = tmp_path / "evidence.jsonl"
    hostile = _hostile_nvcc(tmp_path, toolchain.nvcc or "nvcc", canary)
    env = dict(os.environ, KERNELWIKI_RUNNER_TOKEN=TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "runner", "verify", "--wiki", str(wiki), "--compile-only", "--no-cache", "--nvcc", hostile]
        + ["--cache-dir", str(tmp_path / "cache"), "--report", str(out), "--jobs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    _assert_no_secret(done.stdout + done.stderr)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    compiles = [r for r in records if r["step"] == "compile"]
    assert compiles and all(r["status"] == "error" and "kept no PTX" in r["message"] for r in compiles), compiles
    _assert_no_secret(out.read_text())


def _forged_job(tmp_path: Path) -> Snippet:
    """The issue's fence as a queue job written by hand: the parser never saw it."""
    source = "__global__ void j4() {}\n"
    snippet = Snippet(
        id="hostile:1",
        page_id="hostile",
        path="hostile.md",
        index=1,
        line=7,
        lang="cuda",
        lang_word="cuda",
        info="cuda compile",
        attributes={},
        mode="compile",
        targets=["sm_90a"],
        source=source,
        full_source=source,
        first_line=8,
        defines_main=False,
        flags=["-DX=$(ln${IFS}-sf${IFS}/proc/self/environ${IFS}keep/0.ptx)"],
        checks={"ptx": ["KERNELWIKI_RUNNER_TOKEN=[^\\x00]*"]},
    )
    snippet.content_hash = content_hash(snippet)
    return snippet


def test_the_queue_workers_verify_refuses_a_job_with_flags_outside_the_vocabulary(
    tmp_path: Path, token_env: None, toolchain: Toolchain
) -> None:
    from app.queue.job import runner_verify

    verify_fn = runner_verify([], toolchain, tmp_path / "cache", ISOLATION_BWRAP)
    records = verify_fn(_forged_job(tmp_path).to_dict(), "sm_90a", True)
    assert records and all(r["status"] == "error" for r in records)
    assert "refused by the runner" in records[0]["message"] and "flags=" in records[0]["message"]
    _assert_no_secret(json.dumps(records))


def test_the_queue_workers_verify_refuses_a_pattern_re2_cannot_take(tmp_path: Path, toolchain: Toolchain) -> None:
    from app.queue.job import runner_verify

    job = dataclasses.replace(_forged_job(tmp_path), flags=[], checks={"ptx": ["(?<=x)y"]})
    records = runner_verify([], toolchain, tmp_path / "cache", ISOLATION_BWRAP)(job.to_dict(), "sm_90a", True)
    assert records[0]["status"] == "error" and "RE2" in records[0]["message"]


# ---------------------------------------------------------------------------------------------------------------------
# Code at compile time (a compromised nvcc stands in for any way to get it): symlinks at every file read back, a forged
# source. Nothing it links to is read; the block does not pass.

_SYMLINK_BODY = '```cuda compile ptx="KW-CANARY[^\\n]*|KERNELWIKI_RUNNER_TOKEN=[^\\x00]*"\n__global__ void j5() {}\n```\n'
_FORGED_BODY = "```cuda compile\nthis is not C++ at all;\n```\n"


def _records_text(report: object) -> str:
    return json.dumps([r.to_dict() for r in report.records])  # type: ignore[attr-defined]


@pytest.mark.parametrize("body", [_SYMLINK_BODY, _FORGED_BODY], ids=["symlinks", "forged-source"])
def test_compile_time_code_gets_nothing_back_through_verify_and_the_multi_target_path(
    tmp_path: Path, canary: Path, token_env: None, toolchain: Toolchain, body: str
) -> None:
    hostile = dataclasses.replace(toolchain, nvcc=_hostile_nvcc(tmp_path, toolchain.nvcc or "nvcc", canary))
    for archs, targets in (("[sm90a]", ["sm_90a"]), ("[sm90a, sm100a]", ["sm_90a", "sm_100a"])):
        wiki = tmp_path / f"wiki-{len(targets)}"
        wiki.mkdir()
        (wiki / "hostile.md").write_text(_page(body, archs), encoding="utf-8")
        report = verify(
            wiki,
            targets=targets,
            compile_only=True,
            use_cache=False,
            cache_dir=tmp_path / "cache",
            toolchain=hostile,
            gpus=[],
            isolation=ISOLATION_BWRAP,
            jobs=1,
        )
        assert {r.target for r in report.records} == set(targets)
        compiles = [r for r in report.records if r.step == "compile"]
        assert compiles, report.records
        for r in compiles:
            if body == _SYMLINK_BODY:  # the symlinked PTX and preprocessed source were refused, not followed
                assert r.status == "error" and "kept no PTX" in r.message, r.message
            else:  # the source is bound read-only: what compiled is the page's text, which is not C++
                assert r.status == "fail" and r.error_kind == "compile error", r.message
        _assert_no_secret(_records_text(report))


def test_compile_time_code_gets_nothing_back_through_the_queue_workers_verify(
    tmp_path: Path, canary: Path, token_env: None, toolchain: Toolchain
) -> None:
    from app.queue.job import runner_verify

    hostile = dataclasses.replace(toolchain, nvcc=_hostile_nvcc(tmp_path, toolchain.nvcc or "nvcc", canary))
    job = dataclasses.replace(_forged_job(tmp_path), flags=[], checks={"ptx": ["KW-CANARY[^\\n]*|KERNELWIKI_RUNNER_TOKEN=.*"]})
    job.content_hash = content_hash(job)
    records = runner_verify([], hostile, tmp_path / "cache", ISOLATION_BWRAP)(job.to_dict(), "sm_90a", True)
    compiles = [r for r in records if r["step"] == "compile"]
    assert compiles and all(r["status"] == "error" and "kept no PTX" in r["message"] for r in compiles), compiles
    _assert_no_secret(json.dumps(records))


def test_a_source_rewritten_during_the_compile_fails_as_tampered_where_nothing_binds_it_read_only(
    tmp_path: Path, canary: Path, toolchain: Toolchain
) -> None:
    """Without bubblewrap the source is not bound read-only: the forger succeeds, and the hash after the compile
    catches it (the text that compiled is not the page's)."""
    hostile = dataclasses.replace(toolchain, nvcc=_hostile_nvcc(tmp_path, toolchain.nvcc or "nvcc", canary))
    wiki = _wiki(tmp_path, _FORGED_BODY)
    report = verify(
        wiki, compile_only=True, use_cache=False, cache_dir=tmp_path / "cache", toolchain=hostile, gpus=[], isolation="none"
    )
    compile_record = next(r for r in report.records if r.step == "compile")
    assert compile_record.status == "fail"
    assert compile_record.error_kind == TAMPERED, compile_record.message


def test_a_program_replaced_by_a_symlink_is_not_handed_back_to_run(tmp_path: Path, canary: Path, toolchain: Toolchain) -> None:
    hostile = dataclasses.replace(toolchain, nvcc=_hostile_nvcc(tmp_path, toolchain.nvcc or "nvcc", canary))
    source = "int main() { return 0; }\n"
    snippet = dataclasses.replace(
        _forged_job(tmp_path), lang="cpp", lang_word="cpp", mode="run", flags=[], checks={}, source=source,
        full_source=source, defines_main=True,
    )  # fmt: skip
    build = build_snippet(snippet, "sm_90a", hostile, want_program=True, isolation=ISOLATION_BWRAP)
    try:
        assert CANARY.encode() not in b"".join(build.program_files.values())
        assert not build.program_files.get("snippet")
    finally:
        build.cleanup()


def test_a_cubin_replaced_by_a_symlink_is_an_error_not_a_pass(tmp_path: Path, canary: Path, toolchain: Toolchain) -> None:
    """Code running where nvcc runs leaves the PTX be and puts a link in place of the cubin: the compile is not a
    pass naming a device binary that never came back (the SASS would be read from whatever the link leads to)."""
    bindir = tmp_path / "tools" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        f'{toolchain.nvcc or "nvcc"} "$@"\n'
        "rc=$?\n"
        "c=" + str(canary.parent) + "\n"
        'for f in keep/*.cubin; do [ -e "$f" ] && ln -sf "$c/canary.txt" "$f"; done\n'
        "exit $rc\n"
    )
    script.chmod(0o755)
    hostile = dataclasses.replace(toolchain, nvcc=str(script))
    snippet = dataclasses.replace(_forged_job(tmp_path), flags=[], checks={})
    build = build_snippet(snippet, "sm_90a", hostile, want_program=False, isolation=ISOLATION_BWRAP)
    try:
        assert build.outcome.status == "error", (build.outcome.status, build.outcome.detail)
        assert "cubin could not be read back" in build.outcome.detail and build.device_binary is None
    finally:
        build.cleanup()


# ---------------------------------------------------------------------------------------------------------------------
# Catastrophic regex.


def test_a_catastrophic_ptx_pattern_ends_within_a_second() -> None:
    start = time.monotonic()
    results = regex_checks({"ptx": ["(a+)+Q"], "no_sass": ["(a|aa)+$Q"]}, "ptx", "a" * 100_000 + "\n")
    assert time.monotonic() - start < 1.0
    assert results[0]["ok"] is False


def test_a_catastrophic_ptx_pattern_on_a_page_finishes_its_verification(tmp_path: Path, toolchain: Toolchain) -> None:
    name = "a" * 40
    wiki = _wiki(tmp_path, f'```cuda compile ptx="(a+)+Q"\n__global__ void {name}() {{}}\n```\n')
    started = time.monotonic()
    report = verify(wiki, compile_only=True, use_cache=False, cache_dir=tmp_path / "cache", gpus=[], jobs=1)
    assert time.monotonic() - started < 120
    record = next(r for r in report.records if r.step == "compile")
    assert record.status == "fail" and record.error_kind == "ptx check failed", record.message


# ---------------------------------------------------------------------------------------------------------------------
# Fills stop at their caps; the kernel surface is refused.

_FILL = """
import os, sys
folder = sys.argv[1]
total = 0
chunk = b"x" * (4 << 20)
try:
    for i in range(4096):
        with open(os.path.join(folder, f"fill{i}"), "wb") as fh:
            for _ in range(16):  # 64 MiB a file: below the file size limit
                fh.write(chunk)
                fh.flush()
                total += len(chunk)
except OSError as exc:
    print("stopped", exc.errno, total)
    sys.exit(0)
print("unbounded", total)
"""


@pytest.mark.parametrize(
    ("folder", "cap"),
    [("/tmp", SANDBOX_TMP_BYTES), ("/dev/shm", SANDBOX_SHM_BYTES), (".", SNIPPET_FOLDER_BYTES)],
    ids=["tmp", "dev-shm", "snippet-folder"],
)
def test_filling_a_folder_stops_at_its_cap(folder: str, cap: int) -> None:
    if folder == "." and os.geteuid() != 0:
        pytest.skip("the snippet folder is a size-capped tmpfs only where the runner may mount one (root)")
    workdir = new_workdir("kw-fill-")
    try:
        res = run_process([sys.executable, "-I", "-c", _FILL, folder], workdir, 120, isolation=ISOLATION_BWRAP)
    finally:
        remove_workdir(workdir)
    assert res.exit_code == 0, res.output
    words = res.stdout.text.split()
    assert words[0] == "stopped" and words[1] == "28", res.output  # ENOSPC
    assert int(words[2]) <= cap


_PROBE = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
calls = {
    "unshare": (272, 0x10000000), "mount": (165, b"none", b"/tmp", b"tmpfs", 0, None), "ptrace": (101, 16, 1, 0, 0),
    "io_uring_setup": (425, 1, None), "keyctl": (250, 0, 0), "bpf": (321, 0, None, 0),
    "perf_event_open": (298, None, 0, -1, -1, 0), "userfaultfd": (323, 0), "setns": (308, -1, 0),
    "clone_newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
}
for name, args in calls.items():
    ret = libc.syscall(*args)
    print(name, ret, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
print([line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")][0])
"""


def test_the_seccomp_filter_refuses_namespaces_mounts_ptrace_and_io_uring(tmp_path: Path) -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86_64 system call numbers")
    res = run_process([sys.executable, "-I", "-c", _PROBE], tmp_path, 30, isolation=ISOLATION_BWRAP)
    assert res.exit_code == 0, res.output
    lines = res.stdout.text.splitlines()
    assert lines[-1] == "2"  # Seccomp: 2 (filter mode)
    for line in lines[:-1]:
        name, ret, err = line.split()
        assert ret == "-1" and err == "EPERM", line


def test_the_toolchain_and_threads_still_work_under_the_filter(tmp_path: Path, toolchain: Toolchain) -> None:
    (tmp_path / "t.cu").write_text("#include <thread>\nint main(){ std::thread t([]{}); t.join(); return 0; }\n")
    res = run_process([toolchain.nvcc or "nvcc", "t.cu", "-o", "t"], tmp_path, 240, isolation=ISOLATION_BWRAP, collect=("t",))
    assert res.exit_code == 0, res.output
    assert res.artifacts.get("t", b"").startswith(b"\x7fELF")
    ran = run_process(["./t"], tmp_path, 30, isolation=ISOLATION_BWRAP)
    assert ran.exit_code == 0, ran.output


def test_the_readback_hands_back_only_regular_files_of_the_sandbox_user(tmp_path: Path, canary: Path) -> None:
    code = (
        "import os; open('ok.txt','w').write('fine'); os.symlink('/proc/self/environ','env.txt'); "
        f"os.symlink({str(canary)!r},'canary.txt'); os.mkfifo('fifo.txt'); os.mkdir('d'); os.symlink('/etc','keep'); "
        "open('big.txt','wb').write(b'x' * 5000)"
    )
    res = run_process(
        [sys.executable, "-I", "-c", code],
        tmp_path,
        30,
        isolation=ISOLATION_BWRAP,
        collect=("*.txt", "keep/passwd"),
        collect_cap=4096,
    )
    assert res.exit_code == 0, res.output
    assert res.artifacts == {"ok.txt": b"fine"}
    assert set(res.refused) == {"env.txt", "canary.txt", "fifo.txt", "big.txt"}


def test_a_program_runs_from_the_bytes_handed_back_through_the_sandbox(tmp_path: Path, toolchain: Toolchain) -> None:
    """The run step's path without a GPU: a host program built, handed back, written into a fresh folder and run under
    bwrap with the GPU device binds, the seccomp filter and the caps (what a CUDA program gets on the H200)."""
    from runner.execute import run_step
    from runner.gpus import Gpu

    source = '#include <cstdio>\nint main() { std::puts("RAN-FROM-HANDED-BACK-BYTES"); return 0; }\n'
    snippet = dataclasses.replace(
        _forged_job(tmp_path), lang="cpp", lang_word="cpp", mode="run", flags=[], checks={}, source=source,
        full_source=source, defines_main=True, output="RAN-FROM-HANDED-BACK-BYTES",
    )  # fmt: skip
    build = build_snippet(snippet, "sm_90a", toolchain, want_program=True, isolation=ISOLATION_BWRAP)
    try:
        assert build.outcome.status == "pass", build.outcome.detail
        assert build.program_files["snippet"].startswith(b"\x7fELF")
        outcome = run_step(build, snippet, "sm_90a", Gpu(0, "no GPU: host program", "9.0"), toolchain, ISOLATION_BWRAP)
    finally:
        build.cleanup()
    assert outcome.status == "pass", outcome.detail
    assert outcome.isolation == ISOLATION_BWRAP


def test_the_folder_mounts_of_a_killed_runner_are_swept_by_the_next(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("folder tmpfs mounts need root")
    code = (
        "import os, signal; from runner.sandbox import new_workdir, folder_capped; w = new_workdir('kw-build-'); "
        "print(w, folder_capped(w), flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    folder, capped = done.stdout.split()
    assert capped == "True"
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f" {folder} " in mounts  # left behind by the killed process
    from runner.sandbox import sweep_stale_workdirs

    assert sweep_stale_workdirs() >= 1
    assert f" {folder} " not in Path("/proc/self/mountinfo").read_text()
    assert not Path(folder).exists()
