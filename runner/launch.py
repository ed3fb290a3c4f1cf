"""Process launcher run as `python3 -I -S launch.py …` in front of every compile and run.

Why a separate process: resource limits must be set between fork and exec, which
is unsafe from a multi-threaded runner (`preexec_fn`), and something has to
stay behind to kill what the snippet leaves running. The launcher

1. becomes a *child subreaper*, so that every orphaned descendant (a daemon that
   called setsid, a double fork) is re-parented to it instead of to init,
2. forks; with `--cgroup-fd` (a write-only descriptor of a cgroup's
   `cgroup.procs`, opened by the runner) it first moves the child into that
   cgroup (the launcher itself stays outside, so a memory kill of the cgroup
   cannot take the reporter with it); the child sets the resource limits it is
   given (file size, address space, data, processes, open files, no core
   dumps), drops to the sandbox's own user id when given `--uid` (the launcher
   itself keeps root, so the command can neither signal nor trace it), and
   execs the command,
3. waits for it with a wall-clock deadline,
4. on exit or timeout SIGKILLs every remaining descendant and reaps it, then
5. with `--collect-fd`, hands the files named by `--collect` back as a stream on
   that descriptor (docs/sandbox.md, "the readback rule"): a child that has
   dropped to the command's own user id opens each one inside the sandbox,
   relative to a directory descriptor of the snippet's folder, every component
   with O_NOFOLLOW, and sends only regular files that user owns, up to
   `--collect-cap` bytes in all; the runner never opens a path in the snippet's
   folder itself,
6. reports `{exit_code, signal, timed_out, leftovers, error, cgroup}` as JSON on the
   status file descriptor given with `--status-fd` (never a file the snippet
   could tamper with).

Standard library only; no imports from the project (it runs with `-I -S`).
"""

from __future__ import annotations

import ctypes
import fnmatch
import json
import os
import resource
import signal
import stat
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.02
"""How often the launcher checks on its child."""


def _children_of(pid: int) -> dict[int, int]:
    """Map of every live process → its parent, read from /proc (only what is readable)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        # pid (comm) state ppid …: comm may hold spaces and parentheses, so split at the last ')'.
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) >= 2 and rest[0] != "Z":
            parents[int(name)] = int(rest[1])
    return parents


def _descendants(root: int) -> list[int]:
    parents = _children_of(root)
    found: list[int] = []
    frontier = [root]
    while frontier:
        current = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == current and pid not in found:
                found.append(pid)
                frontier.append(pid)
    return found


def _reap_any(statuses: dict[int, int]) -> None:
    """Reap every exited child without blocking, remembering each one's wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        statuses[pid] = status


def _proc_matches_own_namespace() -> bool:
    """Is /proc the proc of our own pid namespace? (Not so when a pid namespace kept the host's /proc.)"""
    try:
        return int(os.readlink("/proc/self")) == os.getpid()
    except (OSError, ValueError):
        return False


def _kill_all(me: int, statuses: dict[int, int]) -> set[int]:
    """SIGKILL every descendant until none is left; returns the pids that were killed."""
    killed: set[int] = set()
    if not _proc_matches_own_namespace():
        _reap_any(statuses)
        return killed  # pids in /proc are not ours to interpret; the pid namespace's end kills the rest
    for _ in range(200):
        pids = _descendants(me)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(POLL_S)
        _reap_any(statuses)
    _reap_any(statuses)
    return killed


COLLECT_TIMEOUT_S = 30.0
"""How long the collecting child may take before it is killed (nothing is handed back then)."""


def _collect_one(dir_fd: int, rel: str, budget: int) -> tuple[bytes | None, str]:
    """The bytes of the regular file `rel` (below `dir_fd`) owned by this process's user id, or (None, why not)."""
    parts = [p for p in rel.split("/") if p]
    fds: list[int] = []
    try:
        current = dir_fd
        for part in parts[:-1]:
            if part in (".", ".."):
                return None, "not a plain path"
            current = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            fds.append(current)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        fd = os.open(parts[-1], flags, dir_fd=current)
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_uid != os.getuid():
            return None, f"owned by user id {st.st_uid}, not the sandbox's"
        if st.st_size > budget:
            return None, f"larger than the {budget} bytes left to hand back"
        chunks: list[bytes] = []
        left = budget + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > budget:
            return None, f"larger than the {budget} bytes left to hand back"
        return data, ""
    except OSError as exc:
        return None, exc.strerror or str(exc)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _collect(patterns: list[str], cap: int, out_fd: int) -> None:
    """Write every file matching `patterns` (`keep/*.ptx`: a folder path, then a name pattern) to `out_fd` as
    frames: a JSON header line `{"name", "size"}` or `{"name", "refused"}`, then `size` bytes."""
    budget = cap
    root = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for pattern in patterns:
        folder, _, name_pattern = pattern.rpartition("/")
        names: list[str] = []
        try:
            dfd = root
            opened: list[int] = []
            for part in [p for p in folder.split("/") if p]:
                dfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                opened.append(dfd)
            names = sorted(n for n in os.listdir(dfd) if fnmatch.fnmatchcase(n, name_pattern))
            for fd in opened:
                os.close(fd)
        except OSError:
            names = []
        for name in names:
            rel = f"{folder}/{name}" if folder else name
            data, why = _collect_one(root, rel, budget)
            if data is None:
                header = {"name": rel, "refused": why}
                os.write(out_fd, (json.dumps(header) + "\n").encode())
                continue
            budget -= len(data)
            os.write(out_fd, (json.dumps({"name": rel, "size": len(data)}) + "\n").encode())
            view = memoryview(data)
            while view:
                view = view[os.write(out_fd, view) :]


def _collect_as(uid: int | None, groups: list[int], patterns: list[str], cap: int, out_fd: int) -> None:
    """Run `_collect` in a child with the command's own user id (never as the launcher's root), with a deadline."""
    child = os.fork()
    if child == 0:
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            _collect(patterns, cap, out_fd)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - the child must never return into the launcher
            os._exit(1)
    deadline = time.monotonic() + COLLECT_TIMEOUT_S
    while True:
        pid, _ = os.waitpid(child, os.WNOHANG)
        if pid:
            return
        if time.monotonic() >= deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return
        time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    status_fd = -1
    collect_fd = -1
    collect: list[str] = []
    collect_cap = 0
    cgroup_fd = -1
    cgroup_required = False
    uid: int | None = None
    groups: list[int] = []
    timeout = 60.0
    limits: dict[int, int] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        key, value = argv[i], argv[i + 1]
        if key == "--status-fd":
            status_fd = int(value)
        elif key == "--timeout":
            timeout = float(value)
        elif key == "--fsize":
            limits[resource.RLIMIT_FSIZE] = int(value)
        elif key == "--as":
            limits[resource.RLIMIT_AS] = int(value)
        elif key == "--nofile":
            limits[resource.RLIMIT_NOFILE] = int(value)
        elif key == "--data":
            limits[resource.RLIMIT_DATA] = int(value)
        elif key == "--nproc":
            limits[resource.RLIMIT_NPROC] = int(value)
        elif key == "--uid":
            uid = int(value)
        elif key == "--cgroup-fd":
            cgroup_fd = int(value)
        elif key == "--cgroup-required":
            cgroup_required = value == "1"
        elif key == "--groups":
            groups = [int(g) for g in value.split(",") if g]
        elif key == "--collect-fd":
            collect_fd = int(value)
        elif key == "--collect":
            collect.append(value)
        elif key == "--collect-cap":
            collect_cap = int(value)
        elif key == "--cpu":
            limits[resource.RLIMIT_CPU] = int(value)
        i += 2
    command = argv[i + 1 :]
    report: dict[str, object] = {
        "exit_code": None,
        "signal": None,
        "timed_out": False,
        "leftovers": 0,
        "error": None,
        "cgroup": None,
    }

    def finish() -> int:
        if status_fd >= 0:
            try:
                os.write(status_fd, json.dumps(report).encode())
                os.close(status_fd)
            except OSError:
                pass
        return 0

    if status_fd >= 0:
        os.set_inheritable(status_fd, False)
    if collect_fd >= 0:
        os.set_inheritable(collect_fd, False)
    if cgroup_fd >= 0:
        os.set_inheritable(cgroup_fd, False)
    if not command:
        report["error"] = "no command"
        return finish()
    limits.setdefault(resource.RLIMIT_CORE, 0)
    for which, limit in list(limits.items()):
        try:  # checked here, where a failure can be reported; the child sets them for real
            soft, hard = resource.getrlimit(which)
        except (ValueError, OSError) as exc:
            report["error"] = f"cannot read limit {which}: {exc}"
            return finish()
        if hard != resource.RLIM_INFINITY and limit > hard and os.geteuid() != 0:
            limits[which] = hard  # an unprivileged launcher cannot raise a hard limit: keep the lower one
    if uid is not None and os.geteuid() != 0:
        report["error"] = "--uid needs a launcher started as root"
        return finish()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # without it orphans go to init; the process group kill still reaches most of them
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    me = os.getpid()
    go_r, go_w = os.pipe() if cgroup_fd >= 0 else (-1, -1)
    child = os.fork()
    if child == 0:
        step = "set its limits"
        try:
            if cgroup_fd >= 0:  # wait until the launcher has moved this process into its cgroup (or gave up)
                os.close(go_w)
                os.close(cgroup_fd)
                go = os.read(go_r, 1)
                os.close(go_r)
                if go != b"1":
                    os.write(2, b"kernelwiki launcher: not run: the command could not join its cgroup\n")
                    os._exit(127)
            for which, limit in limits.items():
                resource.setrlimit(which, (limit, limit))
            if uid is not None:
                step = f"switch to user id {uid}"
                os.setgroups(groups)  # only those owning the GPU device nodes (--groups), else none
                os.setgid(uid)
                os.setuid(uid)
            step = f"run {command[0]}"
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execvp(command[0], command)
        except (OSError, ValueError) as exc:
            os.write(2, f"kernelwiki launcher: cannot {step}: {getattr(exc, 'strerror', None) or exc}\n".encode())
        os._exit(127)
    if cgroup_fd >= 0:
        os.close(go_r)
        try:  # the pid as this (possibly namespaced) process sees it: the kernel reads it in the writer's namespace
            os.write(cgroup_fd, str(child).encode())
            report["cgroup"] = "joined"
        except OSError as exc:
            report["cgroup"] = f"cannot move the command into its cgroup: {exc.strerror or exc}"
            if cgroup_required:
                report["error"] = f"not run: {report['cgroup']}"
        os.close(cgroup_fd)
        try:
            os.write(go_w, b"1" if report["cgroup"] == "joined" or not cgroup_required else b"0")
        except OSError:
            pass
        os.close(go_w)
    deadline = time.monotonic() + timeout
    statuses: dict[int, int] = {}
    while child not in statuses:
        _reap_any(statuses)
        if child in statuses:
            break
        if time.monotonic() >= deadline:
            report["timed_out"] = True
            break
        time.sleep(POLL_S)
    killed = _kill_all(me, statuses)
    report["leftovers"] = len(killed - {child})
    if collect_fd >= 0:  # nothing of the command is left running: hand its files back through the sandbox
        _collect_as(uid, groups, collect, collect_cap, collect_fd)
        os.close(collect_fd)
    status = statuses.get(child)
    if status is None:
        try:
            _, status = os.waitpid(child, 0)
        except ChildProcessError:
            status = None
    if status is not None:
        if os.WIFEXITED(status):
            report["exit_code"] = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            report["signal"] = os.WTERMSIG(status)
            report["exit_code"] = -os.WTERMSIG(status)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
