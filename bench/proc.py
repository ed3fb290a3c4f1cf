"""Watching a benchmarked server process from outside (Linux /proc), and a free port to serve it on."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """CPU seconds used by a process and every live process below it (the zygote of `serve --workers` and its
    workers), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def wait_idle(pid: int, seconds: float = 180.0) -> float:
    """Wait until the server has finished its start-up work (index build, page warm-up): under 5% CPU for 1 s."""
    started = time.monotonic()
    before = cpu_seconds(pid)
    while time.monotonic() - started < seconds:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        if now - before < 0.05:
            break
        before = now
    return time.monotonic() - started


def free_port() -> int:
    """A local TCP port free at the time of asking (benchmarks and tests serve on it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (the workers of `serve --workers`, and multiprocessing's helpers)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def memory_mb(pid: int) -> dict[str, float]:
    """A process's resident memory in MB: all of it (rss), its proportional share of pages shared with other processes
    (pss: the index's memory maps count once over the processes that map them), what only it holds (private) and its
    anonymous memory (anon: heap and stacks, not file pages). Private counts the pages of the memory-mapped index that
    only this process has touched so far (clean file pages, page cache the kernel can drop and share); anon does not."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value)  # kB
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return {
        "rss_mb": round(fields["Rss"] / 1024, 1),
        "pss_mb": round(fields["Pss"] / 1024, 1),
        "private_mb": round(private / 1024, 1),
        "anon_mb": round(fields.get("Anonymous", 0) / 1024, 1),
    }


def _own_cpu(pid: int) -> float | None:
    """CPU seconds a process has used itself (user + system), or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`: children, grandchildren (the workers `serve --workers`' zygote forked), …"""
    found, stack = [], [pid]
    while stack:
        kids = children(stack.pop())
        found += kids
        stack += kids
    return found


def user_pids(user: str) -> list[int]:
    """The live processes of the system user `user` (e.g. the PostgreSQL server's, its backends included)."""
    import pwd

    uid = str(pwd.getpwnam(user).pw_uid)
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
            if uid_line.split()[1:2] == [uid]:
                found.append(int(entry.name))
    return found


def run_with_cpu(
    command: list[str], timeout: float, every: float = 0.1, server_user: str | None = None, **popen: object
) -> tuple[float, float, float]:
    """Run `command` to its end: (wall seconds, CPU seconds of it and of every process below it, CPU seconds
    the processes of `server_user` used meanwhile, e.g. the PostgreSQL server's; 0.0 without one).

    Processes below it (a pool's workers, forked from a fork server that nobody waits for) and the
    server's are sampled every `every` seconds from /proc while they live, so each may be short by up to
    that much of its last interval (a server backend that ends with the command's connection, too); the
    command's own CPU (and its waited children's) comes from the kernel at its end. The server's figure
    holds whatever else it served meanwhile: measure on a machine where nothing else uses it.
    """
    import subprocess

    before = os.times()
    server_start = {pid: _own_cpu(pid) or 0.0 for pid in user_pids(server_user)} if server_user else {}
    server_seen: dict[int, float] = {}
    started = time.perf_counter()
    proc = subprocess.Popen(command, **popen)  # type: ignore[call-overload]
    seen: dict[int, float] = {}
    try:
        while proc.poll() is None:
            if time.perf_counter() - started > timeout:
                raise subprocess.TimeoutExpired(command, timeout)
            for pid in descendants(proc.pid):
                cpu = _own_cpu(pid)
                if cpu is not None:
                    seen[pid] = max(cpu, seen.get(pid, 0.0))
            for pid in user_pids(server_user) if server_user else []:
                cpu = _own_cpu(pid)
                if cpu is not None:
                    server_seen[pid] = max(cpu, server_seen.get(pid, 0.0))
            time.sleep(every)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    wall = time.perf_counter() - started
    after = os.times()
    own = after.children_user + after.children_system - before.children_user - before.children_system
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, command)
    server = sum(cpu - server_start.get(pid, 0.0) for pid, cpu in server_seen.items())
    return wall, own + sum(seen.values()), server
