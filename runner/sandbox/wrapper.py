"""The isolation wrapper's command line: bubblewrap's fresh root (what it binds, read-only or not) or unshare's.

Only what a command needs is visible: the system and toolchain folders
(`sandbox_roots`), the launcher, the snippet's own folder, and for GPU runs the
device nodes. docs/sandbox.md describes the layout.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from pathlib import Path

from runner.sandbox.uids import runner_is_root
from runner.settings import ISOLATION_BWRAP, ISOLATION_UNSHARE, MiB, RunnerSettings, runner_settings

LAUNCHER = Path(__file__).resolve().parent.parent / "launch.py"
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

SANDBOX_TMP_BYTES = 512 * MiB
SANDBOX_SHM_BYTES = 256 * MiB
"""Sizes of the sandbox's private /tmp and /dev/shm (tmpfs, RAM): a fill stops at ENOSPC."""


def find_bwrap(settings: RunnerSettings | None = None) -> str | None:
    """bubblewrap: the `bwrap` setting (KERNELWIKI_BWRAP) or `bwrap` on PATH."""
    explicit = (settings or runner_settings()).bwrap
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("bwrap")


def is_under(path: str, roots: list[str]) -> bool:
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
        if not is_under(extra, roots):
            roots.append(extra)
    for lib in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        real = os.path.realpath(lib) if lib else ""
        if real and os.path.isdir(real) and not is_under(real, roots):
            roots.append(real)
    for extra in settings.extra_binds:
        if os.path.exists(extra) and not is_under(extra, roots):
            roots.append(os.path.abspath(extra))
    return roots


def bwrap_prefix(
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
    if runner_is_root():
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
        if folder + "/." in present or is_under(folder, [p for p in present if not p.endswith("/.")]):
            continue
        args += ["--perms", "0755", "--dir", folder]
        present.append(folder + "/.")  # made, not bound: what lies below it still has to be made
    return args


def unshare_prefix(unshare: str) -> list[str]:
    prefix = [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    return prefix + ["--"]


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
            return bwrap_prefix(bwrap, workdir, settings, argv0, gpu, protect, seccomp_fd)
    if isolation == ISOLATION_UNSHARE:
        unshare = shutil.which("unshare")
        if unshare:
            return unshare_prefix(unshare)
    return []


def device_groups() -> list[int]:
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
