"""Running one compile or one program: a fresh process, its own folder, limits, and isolation.

Every command runs under `runner/launch.py` (resource limits, wall-clock
timeout, killing of every leftover descendant, exact exit status) and, where the
machine allows it, inside an isolation wrapper that starts the launcher:

* `bwrap` (bubblewrap): no network, separate pid/ipc/uts namespaces, the whole
  file system read-only except the snippet's folder, a private /tmp and /dev/shm;
* `unshare-net` (util-linux `unshare`): no network and a separate pid namespace
  (everything the snippet started dies with it), but the file system is shared;
* `none`: only the launcher's limits and process cleanup.

The isolation that actually applied is returned with every result, so evidence
never claims more than was in force. Output is read incrementally and capped:
a program printing gigabytes costs neither memory nor disk.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ISOLATION_BWRAP = "bwrap"
ISOLATION_UNSHARE = "unshare-net"
ISOLATION_NONE = "none"

ISOLATION_PROBE_TIMEOUT_S = 15
"""Limit for the one-off check that an isolation wrapper works on this machine."""

LAUNCHER_GRACE_S = 10
"""Extra time the runner grants the launcher beyond the command's own timeout before killing it."""

DRAIN_GRACE_S = 1.0
"""How long to keep reading output after the launcher has exited."""

OUTPUT_HEAD_BYTES = 48 * 1024
OUTPUT_TAIL_BYTES = 16 * 1024
"""Kept per stream: the first and last bytes of a command's output; the middle is counted, not kept."""

READ_CHUNK = 64 * 1024

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|DATABASE_URL|KERNELWIKI_DB|KERNELWIKI_RUNNER_TOKEN|CREDENTIAL|API_KEY|PRIVATE_KEY|AUTH",
    re.I,
)
"""Environment variables whose names match this never reach a snippet."""

LAUNCHER = Path(__file__).with_name("launch.py")

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Resource limits of one command."""

    file_size_bytes: int = 512 * MiB  # RLIMIT_FSIZE: the largest file it may write
    address_space_bytes: int | None = 16 * GiB  # RLIMIT_AS; None for CUDA programs (they reserve huge VA ranges)
    open_files: int = 4096  # RLIMIT_NOFILE


COMPILE_LIMITS = Limits(file_size_bytes=512 * MiB, address_space_bytes=16 * GiB)
"""nvcc / ptxas / py_compile: a memory ceiling is safe for them."""

GPU_RUN_LIMITS = Limits(file_size_bytes=256 * MiB, address_space_bytes=None)
"""Programs that use CUDA: no RLIMIT_AS, since the driver reserves far more virtual memory than it uses."""


@dataclass
class CapturedOutput:
    """Capped text of one output stream."""

    text: str = ""  # head, "[… N lines omitted]", tail
    truncated: bool = False  # True when lines were omitted
    omitted_lines: int = 0  # how many lines were left out
    total_bytes: int = 0  # how many bytes the command wrote in all


class OutputCap:
    """Keeps the first `head` and last `tail` bytes of a stream, counting the lines in between."""

    def __init__(self, head: int = OUTPUT_HEAD_BYTES, tail: int = OUTPUT_TAIL_BYTES) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.middle_newlines = 0
        self.middle_bytes = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Take the next chunk of output; never holds more than head + 2 × tail bytes."""
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_cap
        if excess > self.tail_cap:
            self.middle_newlines += self.tail.count(b"\n", 0, excess)
            self.middle_bytes += excess
            del self.tail[:excess]

    def result(self) -> CapturedOutput:
        """The kept text, cut at line boundaries, with a marker saying how many lines were left out."""
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            self.middle_newlines += self.tail.count(b"\n", 0, excess)
            self.middle_bytes += excess
            del self.tail[:excess]
        if self.middle_bytes == 0:
            data = bytes(self.head + self.tail)
            return CapturedOutput(data.decode("utf-8", "replace"), False, 0, self.total)
        head, tail = bytes(self.head), bytes(self.tail)
        omitted = self.middle_newlines
        cut = head.rfind(b"\n")
        if cut >= 0:
            omitted += head.count(b"\n", cut + 1)
            head = head[: cut + 1]
        else:
            head = head + b"\n"
        first = tail.find(b"\n")
        if first >= 0:
            omitted += 1  # the partial line at the start of the tail, completed by its newline
            tail = tail[first + 1 :]
        else:
            tail = b""
        marker = f"[… {omitted} lines omitted]\n".encode()
        text = (head + marker + tail).decode("utf-8", "replace")
        return CapturedOutput(text, True, omitted, self.total)


def shorten(text: str, limit: int = 8192) -> str:
    """`text` capped like command output: head and tail kept, the middle replaced by the omission marker."""
    cap = OutputCap(head=limit // 2, tail=limit // 2)
    cap.feed(text.encode("utf-8", "replace"))
    return cap.result().text


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


def clean_environment(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The runner's environment without anything that looks like a secret, plus `extra`."""
    source = dict(os.environ if base is None else base)
    env = {k: v for k, v in source.items() if not SECRET_NAME.search(k)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


_isolation_lock = threading.Lock()
_isolation_cache: dict[str, str] = {}


def find_bwrap() -> str | None:
    """bubblewrap: `KERNELWIKI_BWRAP` or `bwrap` on PATH."""
    explicit = os.environ.get("KERNELWIKI_BWRAP")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("bwrap")


def _bwrap_prefix(bwrap: str, workdir: Path) -> list[str]:
    work = str(workdir)
    return [
        bwrap, "--die-with-parent", "--unshare-all",
        "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--bind", work, work, "--chdir", work, "--",
    ]  # fmt: skip


def _unshare_prefix(unshare: str) -> list[str]:
    prefix = [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    return prefix + ["--"]


def _probe(argv: list[str], cwd: Path) -> bool:
    try:
        done = subprocess.run(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=ISOLATION_PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def detect_isolation(wanted: str | None = None) -> str:
    """The strongest isolation that works here (checked once by running it): bwrap, unshare-net or none.

    `wanted` (or the environment variable `KERNELWIKI_ISOLATION`) may ask for
    `none`, `unshare-net`, `bwrap` or `auto`; a wrapper that does not work is
    never claimed.
    """
    wanted = (wanted or os.environ.get("KERNELWIKI_ISOLATION") or "auto").strip().lower()
    with _isolation_lock:
        if wanted in _isolation_cache:
            return _isolation_cache[wanted]
        result = ISOLATION_NONE
        if wanted != ISOLATION_NONE:
            with tempfile.TemporaryDirectory(prefix="kw-probe-") as tmp:
                probe_dir = Path(tmp)
                # The probe must show what the sandbox promises: only the loopback interface.
                check = [sys.executable, "-I", "-S", "-c",
                         "import os,sys; sys.exit(0 if os.listdir('/proc/self/net') and "
                         "[l.split(':')[0].strip() for l in open('/proc/self/net/dev').read().splitlines()[2:]] == ['lo'] else 3)"]  # fmt: skip
                bwrap = find_bwrap()
                if wanted in ("auto", ISOLATION_BWRAP) and bwrap and _probe(_bwrap_prefix(bwrap, probe_dir) + check, probe_dir):
                    result = ISOLATION_BWRAP
                unshare = shutil.which("unshare")
                if result == ISOLATION_NONE and wanted in ("auto", ISOLATION_UNSHARE, "unshare") and unshare:
                    if _probe(_unshare_prefix(unshare) + check, probe_dir):
                        result = ISOLATION_UNSHARE
        _isolation_cache[wanted] = result
        return result


def isolation_prefix(isolation: str, workdir: Path) -> list[str]:
    """The wrapper command for an isolation level (empty for none)."""
    if isolation == ISOLATION_BWRAP:
        bwrap = find_bwrap()
        if bwrap:
            return _bwrap_prefix(bwrap, workdir)
    if isolation == ISOLATION_UNSHARE:
        unshare = shutil.which("unshare")
        if unshare:
            return _unshare_prefix(unshare)
    return []


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
) -> ProcessResult:
    """Run `argv` in `workdir` through the launcher: stdin closed, cleaned environment, capped output.

    Never raises for the command's own failures; an infrastructure problem is
    reported in `ProcessResult.error`.
    """
    workdir = Path(workdir).resolve()
    level = detect_isolation() if isolation is None else isolation
    wrapper = isolation_prefix(level, workdir)
    if not wrapper:
        level = ISOLATION_NONE
    env = clean_environment({"HOME": str(workdir), "TMPDIR": str(workdir), **(extra_env or {})})
    status_r, status_w = os.pipe()
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER), "--status-fd", str(status_w), "--timeout", str(timeout_s),
                "--fsize", str(limits.file_size_bytes), "--nofile", str(limits.open_files)]  # fmt: skip
    if limits.address_space_bytes:
        launcher += ["--as", str(limits.address_space_bytes)]
    # The launcher runs inside the wrapper: under a pid namespace it is the namespace's first process, so
    # it reaps everything the snippet starts and reports the command's own exit status or signal.
    full = wrapper + launcher + ["--"] + list(argv)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            full,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status_w,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(status_r)
        os.close(status_w)
        return ProcessResult(list(argv), None, None, False, 0.0, isolation=level, error=f"cannot start: {exc}")
    os.close(status_w)
    caps = {"stdout": OutputCap(head_bytes, tail_bytes), "stderr": OutputCap(head_bytes, tail_bytes)}
    status_buf = bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    status_file = os.fdopen(status_r, "rb", buffering=0)
    sel.register(status_file, selectors.EVENT_READ, "status")
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
                else:
                    caps[key.data].feed(chunk)
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr, status_file):
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
    try:
        report = json.loads(bytes(status_buf).decode() or "null")
    except ValueError:
        report = None
    if not isinstance(report, dict):
        result.error = "the launcher was lost before it reported (killed at the hard deadline)" if killed_hard else "the launcher reported nothing"
        return result
    result.exit_code = report.get("exit_code")
    result.signal = report.get("signal")
    result.timed_out = bool(report.get("timed_out")) or killed_hard
    result.leftovers = int(report.get("leftovers") or 0)
    if report.get("error"):
        result.error = str(report["error"])
    return result


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
