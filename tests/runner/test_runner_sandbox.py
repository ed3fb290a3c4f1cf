"""One compile or run = one fresh process: timeouts kill everything, output is capped, the environment
is an allow-list, network stays out, weaker isolation is never chosen silently, and the evidence names
only the isolation that was really in force.

These tests use plain host programs (sh, python): no GPU and no nvcc needed. The attacks themselves
are in test_sandbox_hostile.py.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from runner.sandbox import (
    ISOLATION_BWRAP,
    ISOLATION_NONE,
    ISOLATION_UNSHARE,
    Limits,
    SandboxUnavailable,
    detect_isolation,
    isolation_problem,
    resource_limit_hit,
    run_process,
    sandbox_environment,
)
from runner.settings import RunnerSettings
from tests.ci import missing_tool
from tests.runner.processes import gone, live_with


def _levels() -> list[str]:
    """none, and every wrapper that works here (bwrap is required under CI: see test_bubblewrap_is_usable)."""
    return [ISOLATION_NONE] + [level for level in (ISOLATION_BWRAP, ISOLATION_UNSHARE) if isolation_problem(level) is None]


@pytest.fixture(params=_levels())
def isolation(request: pytest.FixtureRequest) -> str:
    return request.param


def test_exit_status_signal_and_output_are_reported(tmp_path: Path, isolation: str) -> None:
    res = run_process(["sh", "-c", "echo out; echo err >&2; exit 3"], tmp_path, 20, isolation=isolation)
    assert (res.exit_code, res.signal, res.timed_out, res.error) == (3, None, False, None)
    assert res.stdout.text == "out\n" and res.stderr.text == "err\n"
    assert res.isolation == isolation
    crashed = run_process(["sh", "-c", "kill -SEGV $$"], tmp_path, 20, isolation=isolation)
    assert crashed.signal_name == "SIGSEGV" and crashed.exit_code == -11


def test_timeout_kills_the_process_group_and_leaves_no_processes(tmp_path: Path, isolation: str) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"  # unique sleep length: findable in /proc
    script = f"sleep {marker} & (setsid sleep {marker} &) ; sh -c 'sleep {marker}' & while :; do :; done"
    started = time.monotonic()
    res = run_process(["sh", "-c", script], tmp_path, 1.5, isolation=isolation)
    assert res.timed_out
    assert time.monotonic() - started < 10
    assert res.leftovers >= 3
    assert gone(lambda: live_with(f"sleep {marker}")) == []


def test_processes_left_behind_after_a_normal_exit_are_killed(tmp_path: Path, isolation: str) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.5"
    res = run_process(
        ["sh", "-c", f"(setsid sleep {marker} > /dev/null 2>&1 &); echo started"], tmp_path, 20, isolation=isolation
    )
    assert res.exit_code == 0 and not res.timed_out
    assert res.stdout.text == "started\n"
    assert res.leftovers == 1
    assert gone(lambda: live_with(f"sleep {marker}")) == []


def test_huge_output_is_capped_at_a_line_boundary_and_says_so(tmp_path: Path) -> None:
    program = "import sys\nfor i in range(400000): sys.stdout.write(f'line {i}\\n')\n"
    res = run_process([sys.executable, "-c", program], tmp_path, 60, head_bytes=4096, tail_bytes=1024)
    out = res.stdout
    assert res.exit_code == 0 and out.truncated
    assert out.total_bytes > 4_000_000
    assert len(out.text) < 4096 + 1024 + 100
    head, marker_and_tail = out.text.split("[… ", 1)
    assert head.endswith("\n") and head.startswith("line 0\n")
    marker, tail = marker_and_tail.split("\n", 1)
    omitted = int(marker.split()[0])
    assert marker == f"{omitted} lines omitted]"
    kept = head.count("\n") + tail.count("\n")
    assert kept + omitted == 400000
    assert tail.endswith("line 399999\n")
    assert all(line.startswith("line ") for line in (head + tail).splitlines())


def test_environment_is_an_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "KERNELWIKI_RUNNER_TOKEN": "t0k3n-a",
        "DATABASE_URL": "postgresql://u:p4ss-b@h/db",
        "GITHUB_PAT": "ghp_c",
        "AWS_SESSION_KEY": "s3cr3t-d",
        "DB_PASS": "pw-e",
        "OPENAI_KEY": "sk-f",
        "SENTRY_DSN": "https://g@sentry",
        "PGPASS": "pw-h",
        "CUDA_API_KEY": "nv-i",  # allow-listed prefix, credential-like name: still dropped
    }
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("KW_HARMLESS", "kept-only-when-named")
    monkeypatch.setenv("CUDA_MODULE_LOADING", "LAZY")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    res = run_process(["env"], tmp_path, 20)
    names = {line.split("=", 1)[0] for line in res.stdout.text.splitlines()}
    assert res.exit_code == 0, res.output
    assert not names & set(secrets)
    assert not any(v in res.stdout.text for v in secrets.values())
    assert "KW_HARMLESS" not in names, "a name not on the allow-list must be dropped"
    assert {"PATH", "CUDA_MODULE_LOADING", "LC_ALL", "HOME", "TMPDIR"} <= names
    assert f"HOME={tmp_path.resolve()}" in res.stdout.text
    named = run_process(["env"], tmp_path, 20, settings=RunnerSettings(extra_env=("KW_HARMLESS",)))
    assert "KW_HARMLESS=kept-only-when-named" in named.stdout.text.splitlines()
    assert set(secrets).isdisjoint(sandbox_environment(tmp_path))


def test_standard_input_is_closed(tmp_path: Path) -> None:
    res = run_process(["sh", "-c", "if read line; then echo got; else echo eof; fi"], tmp_path, 20)
    assert res.stdout.text == "eof\n"


def test_file_size_limit_stops_runaway_writes(tmp_path: Path) -> None:
    limits = Limits(file_size_bytes=100_000)
    res = run_process(["sh", "-c", "head -c 5000000 /dev/zero > big.bin"], tmp_path, 20, limits=limits)
    assert res.exit_code != 0
    assert (tmp_path / "big.bin").stat().st_size <= 100_000
    assert resource_limit_hit(res, limits) == "file size limit (100000 bytes) reached"
    files = Limits(open_files=64)
    many = run_process([sys.executable, "-c", "fs = [open('f%d' % i, 'w') for i in range(100)]"], tmp_path, 20, limits=files)
    assert "Too many open files" in many.output
    assert resource_limit_hit(many, files) == "open files limit (64) reached"


def test_address_space_limit_applies_to_compile_processes(tmp_path: Path) -> None:
    program = "b = bytearray(1 << 30)\nprint('allocated')"
    res = run_process([sys.executable, "-c", program], tmp_path, 60, limits=Limits(address_space_bytes=512 * 1024 * 1024))
    assert res.exit_code != 0 and "MemoryError" in res.stderr.text


_NET_PROBE = "tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' '"


def test_isolation_recorded_truthfully(tmp_path: Path, isolation: str) -> None:
    res = run_process(["sh", "-c", _NET_PROBE], tmp_path, 20, isolation=isolation)
    interfaces = res.stdout.text.split()
    assert res.isolation == isolation
    if isolation in (ISOLATION_UNSHARE, ISOLATION_BWRAP):
        assert interfaces == ["lo"], "a network namespace must leave only the loopback interface"
    host = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    if isolation == ISOLATION_NONE and len(host) > 1:
        assert len(interfaces) == len(host), "without isolation the host's interfaces are visible"


def test_without_bubblewrap_nothing_runs_and_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    missing = RunnerSettings(bwrap=str(tmp_path / "no-such-bwrap"))
    marker = tmp_path / "ran"
    res = run_process(["sh", "-c", f"touch {marker}"], tmp_path, 20, settings=missing)
    assert not marker.exists(), "the command must not run without the sandbox asked for"
    assert res.exit_code is None and res.error and "not run" in res.error
    assert "apt-get install bubblewrap" in res.error and "--isolation none" in res.error
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        detect_isolation(None, missing)
    assert detect_isolation("auto", missing) in (ISOLATION_UNSHARE, ISOLATION_NONE), "auto may fall back: it was asked for"
    weak = run_process(["sh", "-c", f"touch {marker}"], tmp_path, 20, isolation=ISOLATION_NONE, settings=missing)
    assert marker.exists() and weak.isolation == ISOLATION_NONE, "explicitly weaker isolation runs, and says so"


def test_an_unknown_isolation_is_refused(tmp_path: Path) -> None:
    res = run_process(["true"], tmp_path, 20, isolation="chroot")
    assert res.exit_code is None and res.error and "unknown isolation" in res.error


def _need_bwrap() -> None:
    """Skip where bubblewrap cannot be used; fail under CI=true (make test installs it)."""
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        missing_tool(f"bubblewrap unusable here: {problem}")


def test_bubblewrap_is_usable() -> None:
    """bwrap is the default: where CI=true (make test installs it) its absence is a failure, not a skip."""
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        missing_tool(problem)


def test_bwrap_keeps_writes_inside_the_snippet_folder(tmp_path: Path) -> None:
    _need_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    res = run_process(
        ["sh", "-c", f"echo in > inside.txt; echo out > {outside}; echo x > /var/tmp/kw-escape-{os.getpid()}"],
        work,
        20,
        isolation=ISOLATION_BWRAP,
    )
    assert res.isolation == ISOLATION_BWRAP
    assert (work / "inside.txt").read_text() == "in\n"
    assert not outside.exists()
    assert not Path(f"/var/tmp/kw-escape-{os.getpid()}").exists()


def test_a_gpu_run_joins_the_groups_of_device_nodes_closed_to_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU device nodes of mode 0660 (group video): the sandbox's own user id must still open them."""
    _need_bwrap()
    if os.geteuid() != 0:
        pytest.skip("needs a root runner (only then does the sandbox get a user id of its own)")
    from runner.sandbox import wrapper

    node = tmp_path / "nvidia-kw-test"
    node.write_text("device\n")
    os.chown(node, 0, 44)
    node.chmod(0o660)
    monkeypatch.setattr(wrapper, "GPU_DEVICE_GLOBS", (str(node),))
    work = tmp_path / "work"
    work.mkdir()
    res = run_process(["sh", "-c", f"id -G; cat {node}"], work, 20, isolation=ISOLATION_BWRAP, gpu=True)
    assert res.exit_code == 0, res.output
    assert "44" in res.stdout.text.split("\n")[0].split() and "device" in res.stdout.text
    plain = run_process(["sh", "-c", "id -G"], work, 20, isolation=ISOLATION_BWRAP)
    assert "44" not in plain.stdout.text.split(), "compiles join no group"


def test_a_host_folder_below_tmp_stays_visible_under_the_private_tmp(tmp_path: Path) -> None:
    _need_bwrap()
    # A checkout (and its .venv) under /tmp, as CI may use: the sandbox's fresh /tmp must not hide it.
    tool = Path("/tmp") / f"kw-tool-{uuid.uuid4().hex}"
    (tool / "bin").mkdir(parents=True)
    try:
        (tool / "bin" / "data.txt").write_text("visible\n")
        tool.chmod(0o755)
        settings = RunnerSettings(extra_binds=(str(tool),))
        res = run_process(["cat", str(tool / "bin" / "data.txt")], tmp_path, 20, isolation=ISOLATION_BWRAP, settings=settings)
        assert res.exit_code == 0 and "visible" in res.output, res.output
        # …while the rest of the host's /tmp stays out of sight.
        other = run_process(["ls", "/tmp"], tmp_path, 20, isolation=ISOLATION_BWRAP, settings=settings)
        assert tool.name in other.output and "kw-tool-" not in other.output.replace(tool.name, "")
    finally:
        for f in sorted(tool.rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        tool.rmdir()
