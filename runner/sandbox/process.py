"""Running one command in the sandbox: the launcher inside the wrapper, its output read and capped, its files read back.

Every command runs under `runner/launch.py` (resource limits, wall-clock
timeout, killing of every leftover descendant, exact exit status) inside the
isolation wrapper (runner/sandbox/wrapper.py). Files the command leaves are
handed back by the launcher, read inside the sandbox as the command's user
(docs/sandbox.md, "the readback rule").
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.cgroup import CgroupUsage
from runner.output import OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, CapturedOutput, OutputCap
from runner.sandbox.environment import sandbox_environment
from runner.sandbox.errors import SandboxUnavailable
from runner.sandbox.isolation import detect_isolation
from runner.sandbox.limits import COMPILE_LIMITS, Limits, command_cgroup, describe_limits
from runner.sandbox.uids import chown_tree, give_uid, runner_is_root, take_uid
from runner.sandbox.wrapper import LAUNCHER, LAUNCHER_IN_SANDBOX, device_groups, is_under, isolation_prefix
from runner.seccomp import SeccompUnsupported, filter_fd
from runner.settings import CGROUP_REQUIRE, ISOLATION_BWRAP, ISOLATION_NONE, MiB, RunnerSettings, runner_settings

LAUNCHER_GRACE_S = 10
"""Extra time the runner grants the launcher beyond the command's own timeout before killing it."""

DRAIN_GRACE_S = 1.0
"""How long to keep reading output after the launcher has exited."""

READ_CHUNK = 64 * 1024

COLLECT_CAP_BYTES = 256 * MiB
"""Most a command's folder may hand back in files (PTX, preprocessed source, cubin, executable): beyond it a
file is refused, never cut."""


@dataclass
class ProcessResult:
    """What happened to one command."""

    argv: list[str]  # the command (without launcher and isolation wrapper)
    exit_code: int | None  # exit status; negative signal number when killed by a signal; None if unknown
    signal: int | None  # terminating signal, if any
    timed_out: bool  # killed at its wall-clock limit
    duration_s: float  # wall-clock seconds
    stdout: CapturedOutput = field(default_factory=CapturedOutput)
    stderr: CapturedOutput = field(default_factory=CapturedOutput)
    leftovers: int = 0  # processes it left behind that the launcher killed
    isolation: str = ISOLATION_NONE  # isolation in force: bwrap, unshare-net or none
    error: str | None = None  # infrastructure problem (could not start, launcher lost), not the command's failure
    cgroup: CgroupUsage | None = None  # the command's cgroup v2 (limits and what it ran into), when one was in force
    limits_in_force: str = ""  # which limit mechanisms held, e.g. "cgroup v2 memory.max 8 GiB …; RLIMIT_DATA 8 GiB …"
    artifacts: dict[str, bytes] = field(default_factory=dict)  # files handed back through the sandbox (`collect=`)
    refused: dict[str, str] = field(default_factory=dict)  # files matching `collect=` that were not handed back, and why

    @property
    def output(self) -> str:
        """stdout then stderr, as one text (each part already capped)."""
        parts = [self.stdout.text]
        if self.stderr.text:
            if parts[0] and not parts[0].endswith("\n"):
                parts.append("\n")
            parts.append(self.stderr.text)
        return "".join(parts)

    @property
    def truncated(self) -> bool:
        return self.stdout.truncated or self.stderr.truncated

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"


def run_process(
    argv: list[str],
    workdir: Path,
    timeout_s: float,
    *,
    limits: Limits = COMPILE_LIMITS,
    isolation: str | None = None,
    extra_env: dict[str, str] | None = None,
    head_bytes: int = OUTPUT_HEAD_BYTES,
    tail_bytes: int = OUTPUT_TAIL_BYTES,
    gpu: bool = False,
    settings: RunnerSettings | None = None,
    collect: tuple[str, ...] | list[str] = (),
    collect_cap: int = COLLECT_CAP_BYTES,
    protect: tuple[str, ...] | list[str] = (),
    extra_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """Run `argv` in `workdir` through the launcher: stdin closed, allow-listed environment, capped output.

    `isolation` (default: the setting) must work here, else nothing runs and
    `ProcessResult.error` says why; `gpu` gives the sandbox the GPU device
    nodes. `collect` names files of the folder (`keep/*.ptx`) that the launcher
    hands back, read inside the sandbox as the command's user, in
    `ProcessResult.artifacts` (docs/sandbox.md, "the readback rule"). Never
    raises for the command's own failures; an infrastructure problem is
    reported in `ProcessResult.error`. `extra_fds` are passed to the command at
    the same numbers and closed here once it has started (the metrics
    descriptor, runner/metrics.py).
    """
    settings = settings or runner_settings()
    workdir = Path(workdir).resolve()
    try:
        level = detect_isolation(isolation, settings)
    except (SandboxUnavailable, ValueError) as exc:
        return _not_run(argv, ISOLATION_NONE, str(exc))
    tool = argv[0] if argv and os.path.isabs(argv[0]) and not is_under(argv[0], [str(workdir)]) else None
    seccomp_fd = -1
    if level == ISOLATION_BWRAP:
        try:
            seccomp_fd = filter_fd()
        except (SeccompUnsupported, OSError) as exc:
            return _not_run(argv, level, f"seccomp: {exc}")
    wrapper = isolation_prefix(level, workdir, settings, tool, gpu, tuple(protect), seccomp_fd)
    if level != ISOLATION_NONE and not wrapper:
        _close_fds(seccomp_fd)
        return _not_run(argv, ISOLATION_NONE, f"{level} vanished")
    env = sandbox_environment(workdir, extra_env, passthrough=settings.extra_env)
    status_r, status_w = os.pipe()
    launcher = launcher_argv(LAUNCHER_IN_SANDBOX if level == ISOLATION_BWRAP else str(LAUNCHER), status_w, timeout_s, limits)
    collect_r = collect_w = -1
    if collect:
        collect_r, collect_w = os.pipe()
        launcher += ["--collect-fd", str(collect_w), "--collect-cap", str(collect_cap)]
        for pattern in collect:
            launcher += ["--collect", pattern]
    uid: int | None = None
    if level == ISOLATION_BWRAP and runner_is_root():
        # Root is exempt from RLIMIT_NPROC: the command runs as a user id of its own, which owns its folder.
        try:
            uid = take_uid(settings)
            chown_tree(workdir, uid)
        except (SandboxUnavailable, OSError) as exc:
            if uid is not None:
                give_uid(uid)
            _close_fds(status_r, status_w, collect_r, collect_w, seccomp_fd)
            return _not_run(argv, level, str(exc))
        launcher += ["--uid", str(uid)]
        groups = device_groups() if gpu else []
        if groups:
            launcher += ["--groups", ",".join(str(g) for g in groups)]
    group, procs_fd, why_not = command_cgroup(settings, limits)
    if group is None and settings.cgroup == CGROUP_REQUIRE:
        if uid is not None:
            give_uid(uid)
        _close_fds(status_r, status_w, collect_r, collect_w, seccomp_fd)
        return _not_run(argv, level, f"cgroup v2 limits are required (KERNELWIKI_CGROUP=require) but {why_not}")
    if group is not None:
        launcher += ["--cgroup-fd", str(procs_fd), "--cgroup-required", "1" if settings.cgroup == CGROUP_REQUIRE else "0"]
    # The launcher runs inside the wrapper: under a pid namespace it is the namespace's first process, so
    # it reaps everything the snippet starts and reports the command's own exit status or signal.
    full = wrapper + launcher + ["--"] + list(argv)
    joined: str | None = None
    try:
        result, joined = _supervise(
            full,
            argv,
            workdir,
            env,
            status_r,
            status_w,
            timeout_s,
            level,
            head_bytes,
            tail_bytes,
            procs_fd,
            collect_r,
            collect_w,
            collect_cap,
            seccomp_fd,
            extra_fds,
        )
    finally:
        if uid is not None:
            give_uid(uid)
        usage = None
        if group is not None:
            usage = group.usage()  # before removal: which limit it ran into
            group.remove()  # kills whatever is left in it (cgroup.kill)
    if group is not None and joined == "joined":
        result.cgroup = usage
    elif group is not None:
        why_not = joined or "the launcher did not say whether the command joined its cgroup"
    result.limits_in_force = describe_limits(limits, result.cgroup, why_not)
    return result


def launcher_argv(path: str, status_fd: int, timeout_s: float, limits: Limits) -> list[str]:
    """The launcher's command line (runner/launch.py at `path`) for a command under `limits`, reporting on `status_fd`."""
    argv = [sys.executable, "-I", "-S", path, "--status-fd", str(status_fd), "--timeout", str(timeout_s)]
    argv += ["--fsize", str(limits.file_size_bytes), "--nofile", str(limits.open_files), "--nproc", str(limits.processes)]
    if limits.address_space_bytes:
        argv += ["--as", str(limits.address_space_bytes)]
    if limits.data_bytes:
        argv += ["--data", str(limits.data_bytes)]
    if limits.cpu_seconds:
        argv += ["--cpu", str(limits.cpu_seconds)]
    return argv


def _not_run(argv: list[str], isolation: str, why: str) -> ProcessResult:
    """The result of a command that was never started, and why (an infrastructure problem, not its failure)."""
    return ProcessResult(list(argv), None, None, False, 0.0, isolation=isolation, error=f"not run: {why}")


def _close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def parse_collected(stream: bytes) -> tuple[dict[str, bytes], dict[str, str]]:
    """The launcher's collect frames (runner/launch.py `_collect`) → (name → bytes, name → why refused). A frame
    cut short (the stream hit its cap) is dropped, never kept in part."""
    files: dict[str, bytes] = {}
    refused: dict[str, str] = {}
    pos = 0
    while pos < len(stream):
        end = stream.find(b"\n", pos)
        if end < 0:
            break
        try:
            header = json.loads(stream[pos:end])
            name = str(header["name"])
        except (ValueError, KeyError, TypeError):
            break
        pos = end + 1
        if "refused" in header:
            refused[name] = str(header["refused"])[:200]
            continue
        size = int(header.get("size", -1))
        if size < 0 or pos + size > len(stream):
            refused[name] = "cut short"
            break
        files[name] = bytes(stream[pos : pos + size])
        pos += size
    return files, refused


def _supervise(
    full: list[str],
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    status_r: int,
    status_w: int,
    timeout_s: float,
    level: str,
    head_bytes: int,
    tail_bytes: int,
    procs_fd: int = -1,
    collect_r: int = -1,
    collect_w: int = -1,
    collect_cap: int = 0,
    seccomp_fd: int = -1,
    extra_fds: tuple[int, ...] = (),
) -> tuple[ProcessResult, str | None]:
    """Start the wrapped launcher, read its output and status, enforce the hard deadline; also returns what the
    launcher said about the command's cgroup ("joined", or why not)."""
    start = time.monotonic()
    passed = tuple(fd for fd in (status_w, procs_fd, collect_w, seccomp_fd) if fd >= 0) + tuple(extra_fds)
    try:
        proc = subprocess.Popen(
            full,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=passed,
            start_new_session=True,
        )
    except OSError as exc:
        _close_fds(status_r, collect_r, *passed)
        return ProcessResult(list(argv), None, None, False, 0.0, isolation=level, error=f"cannot start: {exc}"), None
    for fd in passed:
        os.close(fd)
    caps = {"stdout": OutputCap(head_bytes, tail_bytes), "stderr": OutputCap(head_bytes, tail_bytes)}
    status_buf = bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    status_file = os.fdopen(status_r, "rb", buffering=0)
    sel.register(status_file, selectors.EVENT_READ, "status")
    streams = [proc.stdout, proc.stderr, status_file]
    collected = bytearray()
    collect_limit = collect_cap + 64 * 1024  # the files plus their header lines
    if collect_r >= 0:
        collect_file = os.fdopen(collect_r, "rb", buffering=0)
        sel.register(collect_file, selectors.EVENT_READ, "collect")
        streams.append(collect_file)
    hard_deadline = start + timeout_s + LAUNCHER_GRACE_S
    exited_at: float | None = None
    killed_hard = False
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= hard_deadline and not killed_hard:
                _kill_group(proc.pid)
                killed_hard = True
                hard_deadline = now + DRAIN_GRACE_S
            elif killed_hard and now >= hard_deadline:
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
                break
            for key, _ in sel.select(timeout=0.1):
                chunk = os.read(key.fd, READ_CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "status":
                    status_buf += chunk[: 4096 - len(status_buf)]
                elif key.data == "collect":
                    collected += chunk[: max(0, collect_limit - len(collected))]
                else:
                    caps[key.data].feed(chunk)
    finally:
        sel.close()
        for stream in streams:
            stream.close()
        try:
            proc.wait(timeout=DRAIN_GRACE_S + 5)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
    duration = time.monotonic() - start
    result = ProcessResult(
        argv=list(argv),
        exit_code=None,
        signal=None,
        timed_out=killed_hard,
        duration_s=duration,
        stdout=caps["stdout"].result(),
        stderr=caps["stderr"].result(),
        isolation=level,
    )
    if collect_r >= 0:
        result.artifacts, result.refused = parse_collected(bytes(collected))
    try:
        report = json.loads(bytes(status_buf).decode() or "null")
    except ValueError:
        report = None
    if not isinstance(report, dict):
        result.error = (
            "the launcher was lost before it reported (killed at the hard deadline)"
            if killed_hard
            else "the launcher reported nothing"
        )
        return result, None
    result.exit_code = report.get("exit_code")
    result.signal = report.get("signal")
    result.timed_out = bool(report.get("timed_out")) or killed_hard
    result.leftovers = int(report.get("leftovers") or 0)
    if report.get("error"):
        result.error = str(report["error"])
    joined = report.get("cgroup")
    return result, str(joined) if joined else None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
