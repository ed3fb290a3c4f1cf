"""cgroup v2 limits of one command: host memory (`memory.max`, no swap) and tasks (`pids.max`).

Resource limits (runner/launch.py) are per process and miss what a program can
do without private memory: `RLIMIT_DATA` does not count shared mappings, tmpfs
files or page cache, and root ignores `RLIMIT_NPROC`. Where the runner can
create cgroups with the `memory` and `pids` controllers, every command gets a
cgroup of its own, made here before it starts and removed after it ends:

* where: the runner's own cgroup (from /proc/self/cgroup) when its
  `cgroup.subtree_control` already enables both controllers, else the nearest
  ancestor whose subtree does (usually the parent: then the runner's cgroup
  offers them in `cgroup.controllers`). The runner never enables controllers itself: its
  own cgroup holds processes (its own), and cgroup v2's no-internal-process
  rule forbids enabling controllers for the children of such a cgroup; an
  ancestor's configuration belongs to whoever set it up;
* what: `memory.max` (the command's host memory), `memory.swap.max` 0 (no
  paging out instead of failing), `memory.oom.group` 1 (an out-of-memory kill
  stops the whole command at once), `pids.max` (processes and threads);
* how the command gets there: the launcher writes its child's pid into
  `cgroup.procs` (a descriptor the runner opened and passed down, so this works
  inside bubblewrap, which shows no writable /sys) before the child execs;
* after: `memory.events` (`oom_kill`) and `pids.events` (`max`) say exactly
  which limit stopped it, `memory.peak` how much memory it used; `cgroup.kill`
  ends whatever is left; the folder is removed.

When any of that is impossible (no cgroup v2, no memory or pids controller
delegated, nothing writable) the reason is returned, and the resource limits
alone stay in force (they are always set, as a second line).

Every function takes the cgroup root as a parameter, so the logic runs against
a folder tree in tests. Standard library only.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SELF_CGROUP = Path("/proc/self/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")
REQUIRED_CONTROLLERS = ("memory", "pids")
RUN_PREFIX = "kernelwiki-run-"
"""Name of a command's cgroup: kernelwiki-run-<runner pid>-<number>."""

EMPTY_WAIT_S = 5.0
"""How long to wait for a killed command's cgroup to empty (a GPU process may take a moment to exit)."""


class CgroupUnavailable(RuntimeError):
    """cgroup v2 limits cannot be used here; the message says why."""


def cgroup2_mount(mountinfo: Path = MOUNTINFO) -> tuple[Path, str] | None:
    """Where cgroup v2 is mounted and which folder of the hierarchy the mount shows (usually `/`), or None.

    /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid one.
    """
    try:
        text = mountinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            unescape = lambda s: s.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")  # noqa: E731
            return Path(unescape(fields[4])), unescape(fields[3])
    return None


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def own_cgroup(root: Path, self_cgroup: Path = SELF_CGROUP, mount_root: str = "/") -> Path:
    """The folder of this process's cgroup v2 under `root` (the mount point of a mount showing `mount_root`)."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError as exc:
        raise CgroupUnavailable(f"cannot read {self_cgroup}: {exc.strerror}") from None
    entry = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    if entry is None:
        raise CgroupUnavailable(f"{self_cgroup} has no cgroup v2 entry (0::): cgroup v1 only")
    if "/.." in entry or entry.startswith(".."):
        raise CgroupUnavailable(f"this process's cgroup {entry} lies outside the cgroup namespace of {root}")
    base = mount_root.rstrip("/")
    if base and entry != base and not entry.startswith(base + "/"):
        raise CgroupUnavailable(f"this process's cgroup {entry} lies outside the part {mount_root} mounted at {root}")
    relative = entry[len(base) :].strip("/")
    own = root / relative if relative else root
    if not (own / "cgroup.procs").is_file():
        raise CgroupUnavailable(f"this process's cgroup {entry} is not at {own}")
    return own


def delegation_parent(root: Path, self_cgroup: Path = SELF_CGROUP, mount_root: str = "/") -> Path:
    """The cgroup under which commands get cgroups of their own, with memory and pids limits.

    The runner's own cgroup when its subtree already enables both controllers,
    else the nearest ancestor (inside `root`) whose subtree does; anything else
    raises CgroupUnavailable naming what is missing.
    """
    own = own_cgroup(root, self_cgroup, mount_root)
    wanted = set(REQUIRED_CONTROLLERS)
    parent: Path | None = own
    while parent is not None and not wanted <= _words(parent / "cgroup.subtree_control"):
        parent = parent.parent if parent != root else None  # the nearest ancestor that enables both
    if parent is None:
        offered = _words(own / "cgroup.controllers")
        missing = sorted(wanted - offered)
        if missing:
            listed = " ".join(sorted(offered)) or "none"
            raise CgroupUnavailable(
                f"cgroup v2 at {root} offers no {' or '.join(missing)} controller to this process (controllers: {listed})"
            )
        raise CgroupUnavailable(
            f"this process's cgroup {own} is the top of the visible hierarchy and holds "
            "processes, so it cannot enable controllers for children (run the runner in a "
            "leaf cgroup below it)"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CgroupUnavailable(f"cannot create cgroups in {parent} (not writable by this user)")
    return parent


@dataclass
class CgroupUsage:
    """What a command's cgroup recorded: its limits and which of them it ran into."""

    path: str
    memory_max: int  # bytes
    pids_max: int
    oom_kills: int = 0  # processes the kernel killed at memory.max
    memory_max_hits: int = 0  # times usage reached memory.max (reclaim, not necessarily a kill)
    pids_max_hits: int = 0  # fork/clone calls refused at pids.max
    memory_peak: int | None = None  # bytes (memory.peak, kernels 5.19+)
    no_swap: bool = True  # memory.swap.max is 0 (False: no swap accounting here, the file was missing)


def _counters(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    except OSError:
        pass
    return out


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


_sequence = itertools.count(1)
_pending_lock = threading.Lock()
_pending: list[Path] = []
"""Command cgroups that could not be removed yet (still emptying): retried before the next one is made."""


class RunCgroup:
    """The cgroup of one command: made with its limits, joined by the command, read, emptied and removed."""

    def __init__(self, path: Path, memory_max: int, pids_max: int) -> None:
        self.path, self.memory_max, self.pids_max = path, memory_max, pids_max
        self.no_swap = False

    @classmethod
    def create(cls, parent: Path, memory_bytes: int, pids: int) -> RunCgroup:
        """A new cgroup under `parent` with these limits; CgroupUnavailable (and nothing left) when it fails."""
        _retry_pending()
        path = parent / f"{RUN_PREFIX}{os.getpid()}-{next(_sequence)}"
        try:
            path.mkdir()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {path}: {exc.strerror}") from None
        group = cls(path, memory_bytes, pids)
        try:
            _write(path / "memory.max", str(memory_bytes))
            _write(path / "pids.max", str(pids))
        except OSError as exc:
            group.remove()
            raise CgroupUnavailable(f"cannot set the limits of {path}: {exc.strerror}") from None
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            try:  # absent without swap accounting / on old kernels: memory.max still holds
                _write(path / name, value)
                group.no_swap = group.no_swap or name == "memory.swap.max"
            except OSError:
                pass
        return group

    def open_procs(self) -> int:
        """A write-only descriptor of `cgroup.procs`, for the launcher to move its child in with."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC | os.O_CREAT, 0o644)

    def usage(self) -> CgroupUsage:
        """The limits and the counters of memory.events and pids.events (read before `remove`)."""
        memory = _counters(self.path / "memory.events")
        pids = _counters(self.path / "pids.events")
        peak = None
        try:
            text = (self.path / "memory.peak").read_text().strip()
            peak = int(text) if text.isdigit() else None
        except OSError:
            pass
        return CgroupUsage(
            str(self.path),
            self.memory_max,
            self.pids_max,
            oom_kills=memory.get("oom_kill", 0),
            memory_max_hits=memory.get("max", 0),
            pids_max_hits=pids.get("max", 0),
            memory_peak=peak,
            no_swap=self.no_swap,
        )

    def populated(self) -> bool:
        """Does a process still live in it? (cgroup.events; a tree without that file is never populated.)"""
        return _counters(self.path / "cgroup.events").get("populated", 0) > 0

    def kill(self) -> None:
        """SIGKILL everything still in it: `cgroup.kill` (Linux 5.14+), else each pid of cgroup.procs."""
        if (self.path / "cgroup.kill").exists():
            try:
                _write(self.path / "cgroup.kill", "1")
                return
            except OSError:
                pass
        if not (self.path / "cgroup.events").exists():
            return  # not a kernel cgroup (a test tree): its cgroup.procs lists no live process of ours
        try:
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def remove(self, wait_s: float = EMPTY_WAIT_S) -> bool:
        """Kill what is left, wait (at most `wait_s`) until it is empty and remove it; False when it is kept
        for later (it is removed before the next cgroup is made)."""
        if self.populated():
            self.kill()
            deadline = time.monotonic() + wait_s
            while self.populated() and time.monotonic() < deadline:
                time.sleep(0.02)
        try:
            os.rmdir(self.path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            with _pending_lock:
                _pending.append(self.path)
            return False


def _retry_pending() -> None:
    with _pending_lock:
        paths = list(_pending)
        _pending.clear()
    for path in paths:
        RunCgroup(path, 0, 0).remove(wait_s=0)


_parent_lock = threading.Lock()
_parent_cache: dict[str, tuple[Path | None, str | None]] = {}


def cgroup_parent(root: str | None = None) -> tuple[Path | None, str | None]:
    """(where command cgroups go, None) or (None, why not); checked once per process and root.

    `root`: the cgroup v2 mount point (None: found in /proc/self/mountinfo).
    """
    key = root or ""
    with _parent_lock:
        if key not in _parent_cache:
            try:
                if root:
                    mount, mount_root = Path(root), "/"
                else:
                    found = cgroup2_mount()
                    if found is None:
                        raise CgroupUnavailable("no cgroup v2 file system is mounted")
                    mount, mount_root = found
                _parent_cache[key] = (delegation_parent(mount, SELF_CGROUP, mount_root), None)
            except CgroupUnavailable as exc:
                _parent_cache[key] = (None, str(exc))
        return _parent_cache[key]
