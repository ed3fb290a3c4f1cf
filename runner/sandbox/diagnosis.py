"""Which limit a failed command ran into, as far as its cgroup, exit and output tell."""

from __future__ import annotations

import re
import signal

from runner.sandbox.limits import Limits, format_size
from runner.sandbox.process import ProcessResult
from runner.settings import GiB, MiB

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
            f"host memory limit (cgroup memory.max {format_size(group.memory_max)}) reached: "
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
