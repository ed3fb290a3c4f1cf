"""Running one compile or one program: a fresh process, its own folder, limits, and isolation.

This module is the runner's trust boundary (docs/sandbox.md): whoever can edit a
page can run code here. Every command runs under `runner/launch.py` (resource
limits, wall-clock timeout, killing of every leftover descendant, exact exit
status) inside an isolation wrapper:

* `bwrap` (bubblewrap, the default and the only level that is a boundary): a
  fresh root holding read-only binds of the system and toolchain directories
  (/usr, /lib*, /bin, the dynamic linker's /etc files, the Python the runner
  uses, the tool being run), the GPU device nodes for runs, a private /tmp,
  /dev and /proc, and the snippet's own folder writable; no network, separate
  pid/ipc/uts namespaces, no capabilities, and, when the runner is root, a
  user id of its own so the process limit counts per sandbox;
* `unshare-net` (util-linux `unshare`): no network and a separate pid namespace,
  but the host file system is visible;
* `none`: only the launcher's limits and process cleanup.

Weaker levels are never chosen silently: when bubblewrap cannot be used and
weaker isolation was not asked for, nothing runs and the error says how to
install it. The level in force is returned with every result, so evidence never
claims more than was in force. The environment is built from an allow-list.
Output is read incrementally and capped: a program printing gigabytes costs
neither memory nor disk.
"""

from __future__ import annotations

import glob
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

from runner.cgroup import CgroupUnavailable, CgroupUsage, RunCgroup, cgroup_parent
from runner.seccomp import SeccompUnsupported, filter_fd
from runner.settings import (
    CGROUP_OFF,
    CGROUP_REQUIRE,
    ISOLATION_AUTO,
    ISOLATION_BWRAP,
    ISOLATION_NONE,
    ISOLATION_UNSHARE,
    GiB,
    MiB,
    RunnerSettings,
    normalize_isolation,
)

__all__ = ["ISOLATION_AUTO", "ISOLATION_BWRAP", "ISOLATION_NONE", "ISOLATION_UNSHARE", "GiB", "MiB"]

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

COLLECT_CAP_BYTES = 256 * MiB
"""Most a command's folder may hand back in files (PTX, preprocessed source, cubin, executable): beyond it a
file is refused, never cut."""

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASS$|DATABASE_URL|KERNELWIKI_DB|KERNELWIKI_RUNNER_TOKEN|CREDENTIAL|API_KEY|PRIVATE_KEY|AUTH|_KEY$|DSN",
    re.I,
)
"""Names that look like credentials: dropped even when an allow-listed prefix (CUDA_, NVIDIA_) matches them."""

ENV_ALLOWED = frozenset({"PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ"})
ENV_ALLOWED_PREFIXES = ("CUDA_", "NVIDIA_", "LC_")
"""The environment a sandboxed command may see from the runner's; everything else is dropped."""

LAUNCHER = Path(__file__).with_name("launch.py")
LAUNCHER_IN_SANDBOX = "/run/kernelwiki/launch.py"
"""Where the launcher is bound inside bubblewrap (the repository itself is not visible there)."""

SYSTEM_PATHS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
)  # fmt: skip
"""Host paths every sandbox sees read-only: system binaries and libraries, and the /etc files the
dynamic linker and the compilers read. A path that is a symlink (merged /usr) is recreated as one."""

GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*")
"""Device nodes a GPU program needs (driver, UVM, MIG capabilities)."""

INSTALL_HINT = (
    "bubblewrap is required to compile and run snippets: install it (Debian/Ubuntu: `apt-get install bubblewrap`, "
    "Fedora/RHEL: `dnf install bubblewrap`) or point KERNELWIKI_BWRAP at the binary; "
    "to accept weaker isolation explicitly, pass `--isolation unshare-net` or `--isolation none` "
    "(setting KERNELWIKI_ISOLATION)"
)

SNIPPET_FOLDER_BYTES = 1 * GiB
"""Size of the tmpfs a snippet's folder is (where the runner may mount one: as root)."""

SANDBOX_TMP_BYTES = 512 * MiB
SANDBOX_SHM_BYTES = 256 * MiB
"""Sizes of the sandbox's private /tmp and /dev/shm (tmpfs, RAM): a fill stops at ENOSPC."""

UID_SLOTS = 256
"""Concurrent sandboxes per runner process that get a user id of their own (when the runner is root)."""


class SandboxUnavailable(RuntimeError):
    """The isolation asked for cannot be used on this machine; nothing was run."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one command (every process it starts inherits them)."""

    file_size_bytes: int = 512 * MiB  # RLIMIT_FSIZE: the largest file it may write
    address_space_bytes: int | None = 16 * GiB  # RLIMIT_AS; None for CUDA programs (they reserve huge VA ranges)
    data_bytes: int | None = None  # RLIMIT_DATA: private writable memory (host memory of a CUDA program)
    processes: int = 512  # RLIMIT_NPROC and cgroup pids.max: processes and threads
    open_files: int = 4096  # RLIMIT_NOFILE
    cpu_seconds: int | None = None  # RLIMIT_CPU per process: CPU time (SIGXCPU, then SIGKILL)
    cgroup_memory_bytes: int | None = None  # cgroup memory.max; None: the data limit, else the address space limit

    @property
    def memory_bytes(self) -> int | None:
        """Host memory of the command in its cgroup (memory.max)."""
        return self.cgroup_memory_bytes or self.data_bytes or self.address_space_bytes


COMPILE_CPU_SECONDS = 240
"""CPU time of each process of a compile (nvcc's steps run one after another, each within it)."""

COMPILE_LIMITS = Limits(file_size_bytes=512 * MiB, address_space_bytes=8 * GiB, cpu_seconds=COMPILE_CPU_SECONDS)
"""nvcc / ptxas / cuobjdump / py_compile: a memory ceiling is safe for them (8 GiB of address space: cicc and
ptxas of the wiki's largest blocks stay far below it)."""

GPU_RUN_LIMITS = Limits(file_size_bytes=256 * MiB, address_space_bytes=None, data_bytes=RunnerSettings().run_memory_bytes)
"""Programs that use CUDA: RLIMIT_DATA, not RLIMIT_AS, since the driver reserves far more address space
(PROT_NONE, not counted by RLIMIT_DATA) than it uses. `run_limits()` applies the settings."""


def run_limits(settings: RunnerSettings) -> Limits:
    """Limits of a GPU program under `settings` (host memory from `run_memory_bytes`)."""
    return Limits(file_size_bytes=GPU_RUN_LIMITS.file_size_bytes, address_space_bytes=None, data_bytes=settings.run_memory_bytes)


_settings_lock = threading.Lock()
_settings: list[RunnerSettings] = []


def runner_settings() -> RunnerSettings:
    """The settings read from the environment, once per process (what a call without `settings=` uses)."""
    with _settings_lock:
        if not _settings:
            _settings.append(RunnerSettings.from_env())
        return _settings[0]


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


def sandbox_environment(
    workdir: Path | str,
    extra: dict[str, str] | None = None,
    base: dict[str, str] | None = None,
    passthrough: tuple[str, ...] = (),
) -> dict[str, str]:
    """The environment of a sandboxed command, by allow-list.

    From `base` (default: this process's environment) only PATH,
    LD_LIBRARY_PATH, LANG/LANGUAGE/LC_*, TZ and CUDA_*/NVIDIA_* (minus names
    that look like credentials) and the names in `passthrough` (the explicit
    setting) are kept; HOME and TMPDIR are the snippet's own folder; `extra`
    (what the runner itself sets, e.g. CUDA_VISIBLE_DEVICES) comes last.
    """
    source = os.environ if base is None else base
    env: dict[str, str] = {}
    for name, value in source.items():
        allowed = name in ENV_ALLOWED or (name.startswith(ENV_ALLOWED_PREFIXES) and not SECRET_NAME.search(name))
        if allowed or name in passthrough:
            env[name] = value
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = env["TMPDIR"] = str(workdir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


def find_bwrap(settings: RunnerSettings | None = None) -> str | None:
    """bubblewrap: the `bwrap` setting (KERNELWIKI_BWRAP) or `bwrap` on PATH."""
    explicit = (settings or runner_settings()).bwrap
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("bwrap")


def _is_root() -> bool:
    return os.geteuid() == 0


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _python_roots() -> list[str]:
    """What the runner's Python needs (the launcher runs with it, and python blocks by default): its
    prefixes and site-packages folders, resolved."""
    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    out: list[str] = []
    for r in roots:
        real = os.path.realpath(r)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    return out


def _install_root(executable: str) -> str:
    """The install folder of a tool: the parent of its `bin` folder, else its own folder."""
    folder = os.path.dirname(executable)
    parent = os.path.dirname(folder)
    if os.path.basename(folder) == "bin" and parent.count("/") >= 2:  # /opt/x/bin → /opt/x, never /opt or /
        return parent
    return folder


def _tool_roots(argv0: str) -> list[str]:
    """Folders a tool needs: its install folder, and those of the programs a wrapper script execs
    (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`)."""
    if not os.path.isabs(argv0):
        found = shutil.which(argv0)
        if not found:
            return []
        argv0 = found
    targets = [argv0, os.path.realpath(argv0)]
    try:
        head = Path(argv0).read_bytes()[:4096]
        if head.startswith(b"#!"):
            targets += [m.decode() for m in re.findall(rb"(/[\w./+-]+)", head) if os.path.isfile(m)]
    except OSError:
        pass
    roots: list[str] = []
    for t in targets:
        root = _install_root(os.path.realpath(t))
        if root not in roots:
            roots.append(root)
    return roots


def sandbox_roots(settings: RunnerSettings | None = None, argv0: str | None = None) -> list[str]:
    """Every host folder a bubblewrap sandbox sees (read-only), besides /dev, /proc, /tmp and the snippet's folder."""
    settings = settings or runner_settings()
    roots = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    for extra in _python_roots() + (_tool_roots(argv0) if argv0 else []):
        if not _under(extra, roots):
            roots.append(extra)
    for lib in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        real = os.path.realpath(lib) if lib else ""
        if real and os.path.isdir(real) and not _under(real, roots):
            roots.append(real)
    for extra in settings.extra_binds:
        if os.path.exists(extra) and not _under(extra, roots):
            roots.append(os.path.abspath(extra))
    return roots


def _bwrap_prefix(
    bwrap: str,
    workdir: Path,
    settings: RunnerSettings,
    argv0: str | None,
    gpu: bool,
    protect: tuple[str, ...] = (),
    seccomp_fd: int = -1,
) -> list[str]:
    """The bubblewrap command line: a fresh root with only what the command needs."""
    work = str(workdir)
    prefix = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "kernelwiki-sandbox",
        "--cap-drop",
        "ALL",
    ]
    if _is_root():
        # No user namespace: the launcher keeps only what it needs to drop to the sandbox's own user id
        # (setuid/setgid) and to kill that user's leftovers; the command itself has no capabilities.
        prefix += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    else:
        prefix += ["--unshare-user"]
    # Private /dev, /proc and /tmp first: a host folder the sandbox needs below one of them (a venv in
    # /tmp/…, as in a CI checkout there) is then bound onto the fresh tmpfs instead of being hidden by it.
    prefix += ["--dev", "/dev", "--proc", "/proc"]
    prefix += ["--perms", "1777", "--size", str(SANDBOX_TMP_BYTES), "--tmpfs", "/tmp"]
    prefix += ["--perms", "1777", "--size", str(SANDBOX_SHM_BYTES), "--tmpfs", "/dev/shm"]
    binds: list[str] = []
    present: list[str] = ["/dev/.", "/proc/.", "/tmp/."]  # folders that exist in the new root (made or bound)
    for path in sorted(sandbox_roots(settings, argv0), key=lambda p: (p.count("/"), p)):
        binds += _parents(path, present)
        if os.path.islink(path) and path in SYSTEM_PATHS:
            binds += ["--symlink", os.readlink(path), path]
        else:
            binds += ["--ro-bind", path, path]
        present.append(path)
    prefix += binds
    if gpu:
        for pattern in GPU_DEVICE_GLOBS:
            for node in sorted(glob.glob(pattern)):
                prefix += _parents(node, present) + ["--dev-bind", node, node]
        if os.path.isdir("/sys"):
            prefix += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads PCI and NUMA topology there
    prefix += _parents(LAUNCHER_IN_SANDBOX, present) + ["--ro-bind", str(LAUNCHER), LAUNCHER_IN_SANDBOX]
    prefix += _parents(work, present) + ["--bind", work, work]
    for name in protect:  # the source: read-only (and, as a mount point, neither renamed nor removed)
        path = os.path.join(work, name)
        if "/" not in name and os.path.isfile(path) and not os.path.islink(path):
            prefix += ["--ro-bind", path, path]
    if seccomp_fd >= 0:
        prefix += ["--seccomp", str(seccomp_fd)]
    prefix += ["--chdir", work, "--"]
    return prefix


def _parents(path: str, present: list[str]) -> list[str]:
    """bwrap arguments making the missing parent folders of `path` traversable (bwrap would make them 0700,
    which the sandbox's own user id could not enter)."""
    args: list[str] = []
    parts = Path(path).parts[1:-1]
    for i in range(1, len(parts) + 1):
        folder = "/" + "/".join(parts[:i])
        if folder + "/." in present or _under(folder, [p for p in present if not p.endswith("/.")]):
            continue
        args += ["--perms", "0755", "--dir", folder]
        present.append(folder + "/.")  # made, not bound: what lies below it still has to be made
    return args


def _unshare_prefix(unshare: str) -> list[str]:
    prefix = [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    return prefix + ["--"]


def _probe(argv: list[str], cwd: Path, pass_fds: tuple[int, ...] = ()) -> str | None:
    """None when `argv` ran and exited 0, else what went wrong."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            pass_fds=pass_fds,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=ISOLATION_PROBE_TIMEOUT_S,
            env=sandbox_environment(cwd),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return (done.stderr or done.stdout).decode(errors="replace").strip()[-300:] or f"exit status {done.returncode}"


_isolation_lock = threading.Lock()
_isolation_cache: dict[tuple[str, str | None], str | None] = {}

_NET_CHECK = (
    "import os,sys; sys.exit(0 if [l.split(':')[0].strip() for l in "
    "open('/proc/self/net/dev').read().splitlines()[2:]] == ['lo'] else 3)"
)
"""The probe must show what the wrapper promises: only the loopback interface."""


def isolation_problem(level: str, settings: RunnerSettings | None = None) -> str | None:
    """None when `level` (bwrap, unshare-net, none) works here (checked once, by running it), else why not."""
    settings = settings or runner_settings()
    if level == ISOLATION_NONE:
        return None
    key = (level, settings.bwrap)
    with _isolation_lock:
        if key in _isolation_cache:
            return _isolation_cache[key]
        with tempfile.TemporaryDirectory(prefix="kw-probe-") as tmp:
            probe_dir = Path(tmp)
            check = [sys.executable, "-I", "-S", "-c", _NET_CHECK]
            if level == ISOLATION_BWRAP:
                bwrap = find_bwrap(settings)
                if not bwrap:
                    where = f"KERNELWIKI_BWRAP={settings.bwrap} is not executable" if settings.bwrap else "no `bwrap` on PATH"
                    problem: str | None = f"{where}; {INSTALL_HINT}"
                else:
                    try:
                        seccomp = filter_fd()
                    except (SeccompUnsupported, OSError) as exc:
                        failed: str | None = f"no seccomp filter: {exc}"
                    else:
                        try:
                            prefix = _bwrap_prefix(bwrap, probe_dir, settings, None, False, seccomp_fd=seccomp)
                            failed = _probe(prefix + check, probe_dir, (seccomp,))
                        finally:
                            os.close(seccomp)
                    problem = f"{bwrap} cannot create a sandbox here ({failed}); {INSTALL_HINT}" if failed else None
            elif level == ISOLATION_UNSHARE:
                unshare = shutil.which("unshare")
                failed = _probe(_unshare_prefix(unshare) + check, probe_dir) if unshare else "no `unshare` on PATH"
                problem = f"unshare cannot create network and pid namespaces here ({failed})" if failed else None
            else:
                problem = f"unknown isolation {level!r}"
        _isolation_cache[key] = problem
        return problem


def detect_isolation(wanted: str | None = None, settings: RunnerSettings | None = None) -> str:
    """The isolation that will be in force for `wanted` (default: the setting, bwrap).

    `auto` is the strongest that works (an explicit request for a possible
    fallback); any other level is returned only if it works, else
    SandboxUnavailable is raised with the reason and how to install bubblewrap.
    """
    settings = settings or runner_settings()
    level = normalize_isolation(wanted or settings.isolation)
    if level == ISOLATION_AUTO:
        for candidate in (ISOLATION_BWRAP, ISOLATION_UNSHARE):
            if isolation_problem(candidate, settings) is None:
                return candidate
        return ISOLATION_NONE
    problem = isolation_problem(level, settings)
    if problem:
        raise SandboxUnavailable(problem)
    return level


def isolation_prefix(
    isolation: str,
    workdir: Path,
    settings: RunnerSettings | None = None,
    argv0: str | None = None,
    gpu: bool = False,
    protect: tuple[str, ...] = (),
    seccomp_fd: int = -1,
) -> list[str]:
    """The wrapper command for an isolation level (empty for none); `protect`: files of the folder bound read-only;
    `seccomp_fd`: a descriptor holding the seccomp program (runner/seccomp.py) bubblewrap loads."""
    settings = settings or runner_settings()
    if isolation == ISOLATION_BWRAP:
        bwrap = find_bwrap(settings)
        if bwrap:
            return _bwrap_prefix(bwrap, workdir, settings, argv0, gpu, protect, seccomp_fd)
    if isolation == ISOLATION_UNSHARE:
        unshare = shutil.which("unshare")
        if unshare:
            return _unshare_prefix(unshare)
    return []


_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()


def _take_uid(settings: RunnerSettings) -> int:
    """A user id no other sandbox of this process is using (RLIMIT_NPROC counts per user)."""
    base = settings.sandbox_uid + (os.getpid() % 1000) * UID_SLOTS
    with _uid_lock:
        for slot in range(UID_SLOTS):
            if base + slot not in _uids_in_use:
                _uids_in_use.add(base + slot)
                return base + slot
    raise SandboxUnavailable(f"more than {UID_SLOTS} sandboxes at once")


def _give_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


def _device_groups() -> list[int]:
    """Groups that own GPU device nodes not open to everyone (e.g. `video`, mode 0660): the sandbox's user id
    joins them, so that a GPU run works under its own id as it would under root."""
    groups: set[int] = set()
    for pattern in GPU_DEVICE_GLOBS:
        for node in glob.glob(pattern):
            try:
                st = os.stat(node)
            except OSError:
                continue
            if st.st_mode & 0o006 != 0o006 and st.st_mode & 0o060:
                groups.add(st.st_gid)
    return sorted(groups)


_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_mounted_lock = threading.Lock()
_mounted: set[str] = set()


_STALE_NAME = re.compile(r"^kw-[a-z]+-(\d+)-[A-Za-z0-9_]+$")
_swept: list[bool] = []


def sweep_stale_workdirs() -> int:
    """Unmount and remove the folder tmpfs mounts of runner processes that are gone (killed mid-build: their folder
    names carry their pid); returns how many. Runs once per process, at its first new_workdir."""
    import ctypes

    tmp = os.path.realpath(tempfile.gettempdir())
    removed = 0
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            points = [line.split()[4] for line in fh if len(line.split()) > 4]
    except OSError:
        return 0
    for point in points:
        m = _STALE_NAME.match(os.path.basename(point))
        if not m or os.path.dirname(point) != tmp or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # its process is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        if ctypes.CDLL(None, use_errno=True).umount2(point.encode(), _MNT_DETACH) == 0:
            shutil.rmtree(point, ignore_errors=True)
            removed += 1
    return removed


def new_workdir(prefix: str) -> Path:
    """A fresh folder for one build or run: a tmpfs of SNIPPET_FOLDER_BYTES where this process may mount one (as
    root), so that what a snippet writes there is capped in all, not only per file; else a plain folder. Its name
    carries this process's pid, so that a later runner can remove it when this one was killed."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    if not _is_root():
        return path
    with _mounted_lock:
        first = not _swept
        _swept.append(True)
    if first:
        sweep_stale_workdirs()
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={SNIPPET_FOLDER_BYTES},mode=0700".encode()
    if libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0:
        with _mounted_lock:
            _mounted.add(str(path))
    return path


def folder_capped(workdir: Path | str) -> bool:
    """Is `workdir` a size-capped tmpfs of new_workdir's?"""
    with _mounted_lock:
        return str(workdir) in _mounted


def remove_workdir(path: Path | str) -> None:
    """Remove a folder of new_workdir's (unmounting its tmpfs first)."""
    path = str(path)
    with _mounted_lock:
        mounted = path in _mounted
        _mounted.discard(path)
    if mounted:
        import ctypes

        ctypes.CDLL(None, use_errno=True).umount2(path.encode(), _MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)


def _chown_tree(root: Path, uid: int) -> None:
    """Give the sandbox's user id its folder (0711: bubblewrap, root without capabilities, must enter it)."""
    os.chown(root, uid, uid)
    os.chmod(root, 0o711)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


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
) -> ProcessResult:
    """Run `argv` in `workdir` through the launcher: stdin closed, allow-listed environment, capped output.

    `isolation` (default: the setting) must work here, else nothing runs and
    `ProcessResult.error` says why; `gpu` gives the sandbox the GPU device
    nodes. `collect` names files of the folder (`keep/*.ptx`) that the launcher
    hands back, read inside the sandbox as the command's user, in
    `ProcessResult.artifacts` (docs/sandbox.md, "the readback rule"). Never
    raises for the command's own failures; an infrastructure problem is
    reported in `ProcessResult.error`.
    """
    settings = settings or runner_settings()
    workdir = Path(workdir).resolve()
    try:
        level = detect_isolation(isolation, settings)
    except (SandboxUnavailable, ValueError) as exc:
        return ProcessResult(list(argv), None, None, False, 0.0, isolation=ISOLATION_NONE, error=f"not run: {exc}")
    tool = argv[0] if argv and os.path.isabs(argv[0]) and not _under(argv[0], [str(workdir)]) else None
    seccomp_fd = -1
    if level == ISOLATION_BWRAP:
        try:
            seccomp_fd = filter_fd()
        except (SeccompUnsupported, OSError) as exc:
            return ProcessResult(list(argv), None, None, False, 0.0, isolation=level, error=f"not run: seccomp: {exc}")
    wrapper = isolation_prefix(level, workdir, settings, tool, gpu, tuple(protect), seccomp_fd)
    if level != ISOLATION_NONE and not wrapper:
        _close_fds(seccomp_fd)
        return ProcessResult(list(argv), None, None, False, 0.0, isolation=ISOLATION_NONE, error=f"not run: {level} vanished")
    env = sandbox_environment(workdir, extra_env, passthrough=settings.extra_env)
    status_r, status_w = os.pipe()
    launcher_path = LAUNCHER_IN_SANDBOX if level == ISOLATION_BWRAP else str(LAUNCHER)
    launcher = [
        sys.executable,
        "-I",
        "-S",
        launcher_path,
        "--status-fd",
        str(status_w),
        "--timeout",
        str(timeout_s),
        "--fsize",
        str(limits.file_size_bytes),
        "--nofile",
        str(limits.open_files),
        "--nproc",
        str(limits.processes),
    ]
    if limits.address_space_bytes:
        launcher += ["--as", str(limits.address_space_bytes)]
    if limits.data_bytes:
        launcher += ["--data", str(limits.data_bytes)]
    if limits.cpu_seconds:
        launcher += ["--cpu", str(limits.cpu_seconds)]
    collect_r = collect_w = -1
    if collect:
        collect_r, collect_w = os.pipe()
        launcher += ["--collect-fd", str(collect_w), "--collect-cap", str(collect_cap)]
        for pattern in collect:
            launcher += ["--collect", pattern]
    uid: int | None = None
    if level == ISOLATION_BWRAP and _is_root():
        # Root is exempt from RLIMIT_NPROC: the command runs as a user id of its own, which owns its folder.
        try:
            uid = _take_uid(settings)
            _chown_tree(workdir, uid)
        except (SandboxUnavailable, OSError) as exc:
            if uid is not None:
                _give_uid(uid)
            _close_fds(status_r, status_w, collect_r, collect_w, seccomp_fd)
            return ProcessResult(list(argv), None, None, False, 0.0, isolation=level, error=f"not run: {exc}")
        launcher += ["--uid", str(uid)]
        groups = _device_groups() if gpu else []
        if groups:
            launcher += ["--groups", ",".join(str(g) for g in groups)]
    group, procs_fd, why_not = _command_cgroup(settings, limits)
    if group is None and settings.cgroup == CGROUP_REQUIRE:
        if uid is not None:
            _give_uid(uid)
        _close_fds(status_r, status_w, collect_r, collect_w, seccomp_fd)
        return ProcessResult(
            list(argv),
            None,
            None,
            False,
            0.0,
            isolation=level,
            error=f"not run: cgroup v2 limits are required (KERNELWIKI_CGROUP=require) but {why_not}",
        )
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
        )
    finally:
        if uid is not None:
            _give_uid(uid)
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


WORKER_CGROUP_DEFAULT = CGROUP_REQUIRE
"""What a GPU worker sets KERNELWIKI_CGROUP to when the operator did not: no job runs without cgroup v2 limits."""


def cgroup_problem(settings: RunnerSettings | None = None) -> str | None:
    """Why commands cannot get the cgroup v2 limits the settings require (KERNELWIKI_CGROUP=require), else None."""
    settings = settings or runner_settings()
    if settings.cgroup != CGROUP_REQUIRE:
        return None
    parent, problem = cgroup_parent(settings.cgroup_root)
    if parent is not None:
        return None
    return (
        f"cgroup v2 limits are required (KERNELWIKI_CGROUP=require, a GPU worker's default) but {problem or 'unavailable'}; "
        "give the worker a delegated cgroup v2 with the memory and pids controllers, or set KERNELWIKI_CGROUP=auto "
        "to accept the resource limits alone"
    )


def _command_cgroup(settings: RunnerSettings, limits: Limits) -> tuple[RunCgroup | None, int, str]:
    """A cgroup v2 of the command's own with its memory and pids limits, and a descriptor of its
    cgroup.procs for the launcher; or (None, -1, why not)."""
    if settings.cgroup == CGROUP_OFF:
        return None, -1, "off (KERNELWIKI_CGROUP=off)"
    memory = limits.memory_bytes
    if not memory:
        return None, -1, "no memory limit was asked for"
    parent, problem = cgroup_parent(settings.cgroup_root)
    if parent is None:
        return None, -1, problem or "unavailable"
    try:
        group = RunCgroup.create(parent, memory, limits.processes)
    except CgroupUnavailable as exc:
        return None, -1, str(exc)
    try:
        return group, group.open_procs(), ""
    except OSError as exc:
        group.remove()
        return None, -1, f"cannot open {group.path}/cgroup.procs: {exc.strerror}"


def _size(n: int) -> str:
    return f"{n / GiB:g} GiB" if n >= GiB else f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


def describe_limits(limits: Limits, cgroup: CgroupUsage | None, why_not: str = "") -> str:
    """The limit mechanisms that held a command, for its evidence: its cgroup v2 (when it had one) and the
    resource limits (always set, the fallback and a second line)."""
    rlimits = []
    if limits.data_bytes:
        rlimits.append(f"RLIMIT_DATA {_size(limits.data_bytes)}")
    if limits.address_space_bytes:
        rlimits.append(f"RLIMIT_AS {_size(limits.address_space_bytes)}")
    rlimits += [
        f"RLIMIT_NPROC {limits.processes}",
        f"RLIMIT_NOFILE {limits.open_files}",
        f"RLIMIT_FSIZE {_size(limits.file_size_bytes)}",
    ]
    if limits.cpu_seconds:
        rlimits.append(f"RLIMIT_CPU {limits.cpu_seconds} s")
    if cgroup is not None:
        swap = " (no swap)" if cgroup.no_swap else ""
        return f"cgroup v2 memory.max {_size(cgroup.memory_max)}{swap}, pids.max {cgroup.pids_max}; " + ", ".join(rlimits)
    return ", ".join(rlimits) + (f"; cgroup v2 not used: {why_not}" if why_not else "")


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
) -> tuple[ProcessResult, str | None]:
    """Start the wrapped launcher, read its output and status, enforce the hard deadline; also returns what the
    launcher said about the command's cgroup ("joined", or why not)."""
    start = time.monotonic()
    passed = tuple(fd for fd in (status_w, procs_fd, collect_w, seccomp_fd) if fd >= 0)
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


_MEMORY_SIGNS = re.compile(
    r"MemoryError|std::bad_alloc|Cannot allocate memory|\bENOMEM\b|cannot allocate|memory exhausted|out of host memory", re.I
)
_PROCESS_SIGNS = re.compile(
    r"fork: (retry: )?Resource temporarily unavailable|BlockingIOError|Cannot fork|can't fork|fork failed|EAGAIN|pthread_create",
    re.I,
)
_FILES_SIGNS = re.compile(r"Too many open files|EMFILE", re.I)


def resource_limit_hit(res: ProcessResult, limits: Limits) -> str | None:
    """When a failed command ran into one of its limits (as far as its exit and output tell), which one.

    The command's cgroup, when it had one, says so exactly: `oom_kill` in
    memory.events (the kernel killed it at memory.max), `max` in pids.events
    (fork or thread creation refused at pids.max). Otherwise the signs are
    read from its exit and output: RLIMIT_DATA / RLIMIT_AS make allocations
    fail at once (the program sees a failed malloc, a MemoryError,
    std::bad_alloc); RLIMIT_NPROC makes fork and thread creation fail;
    RLIMIT_FSIZE kills with SIGXFSZ. None for a command that succeeded or
    failed for other reasons.
    """
    if res.exit_code == 0 and res.signal is None:
        return None
    group = res.cgroup
    if group is not None and group.oom_kills:
        return (
            f"host memory limit (cgroup memory.max {_size(group.memory_max)}) reached: "
            f"the kernel killed {group.oom_kills} process(es) of it"
        )
    if res.signal == signal.SIGXFSZ or res.exit_code == 128 + signal.SIGXFSZ or "File size limit exceeded" in res.output:
        size = limits.file_size_bytes
        shown = f"{size // MiB} MiB" if size >= MiB else f"{size} bytes"
        return f"file size limit ({shown}) reached"
    text = res.output
    if _MEMORY_SIGNS.search(text):
        cap = limits.data_bytes or limits.address_space_bytes
        what = "RLIMIT_DATA" if limits.data_bytes else "RLIMIT_AS"
        return f"host memory limit ({what} {cap / GiB:g} GiB) reached" if cap else "host memory exhausted"
    if group is not None and group.pids_max_hits:  # after the memory signs: a program stopped by its failed
        # malloc may have run into the process limit before, as the hostile CUDA program does
        return f"process limit (cgroup pids.max {group.pids_max} processes and threads) reached"
    if _PROCESS_SIGNS.search(text):
        return f"process limit ({limits.processes} processes and threads) reached"
    if _FILES_SIGNS.search(text):
        return f"open files limit ({limits.open_files}) reached"
    return None


_INCLUDE_ERROR = re.compile(
    r'cannot open source file "([^"]+)"'  # EDG front end (cudafe++)
    r"|fatal error: ([^\s:][^:\n]*): No such file or directory"  # gcc / clang preprocessor
)


def paths_outside_sandbox(output: str, workdir: Path | str, settings: RunnerSettings | None = None) -> list[str]:
    """Files a failed compile tried to include that lie outside what the sandbox shows (its folder and
    the read-only system and toolchain folders), as written in the source."""
    work = str(Path(workdir).resolve())
    roots = sandbox_roots(settings) + [work]
    found: list[str] = []
    for m in _INCLUDE_ERROR.finditer(output):
        name = (m.group(1) or m.group(2) or "").strip()
        if not name or name in found:
            continue
        resolved = os.path.normpath(os.path.join(work, name))
        if (os.path.isabs(name) or ".." in Path(name).parts) and not _under(resolved, roots):
            found.append(name)
    return found
