"""Resource limits of a command: the rlimits the launcher sets, the command's cgroup v2, and how they are described."""

from __future__ import annotations

from dataclasses import dataclass

from runner.cgroup import CgroupUnavailable, CgroupUsage, RunCgroup, cgroup_parent
from runner.settings import CGROUP_OFF, CGROUP_REQUIRE, GiB, MiB, RunnerSettings, runner_settings


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


def command_cgroup(settings: RunnerSettings, limits: Limits) -> tuple[RunCgroup | None, int, str]:
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


def format_size(n: int) -> str:
    return f"{n / GiB:g} GiB" if n >= GiB else f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


def describe_limits(limits: Limits, cgroup: CgroupUsage | None, why_not: str = "") -> str:
    """The limit mechanisms that held a command, for its evidence: its cgroup v2 (when it had one) and the
    resource limits (always set, the fallback and a second line)."""
    rlimits = []
    if limits.data_bytes:
        rlimits.append(f"RLIMIT_DATA {format_size(limits.data_bytes)}")
    if limits.address_space_bytes:
        rlimits.append(f"RLIMIT_AS {format_size(limits.address_space_bytes)}")
    rlimits += [
        f"RLIMIT_NPROC {limits.processes}",
        f"RLIMIT_NOFILE {limits.open_files}",
        f"RLIMIT_FSIZE {format_size(limits.file_size_bytes)}",
    ]
    if limits.cpu_seconds:
        rlimits.append(f"RLIMIT_CPU {limits.cpu_seconds} s")
    if cgroup is not None:
        swap = " (no swap)" if cgroup.no_swap else ""
        return f"cgroup v2 memory.max {format_size(cgroup.memory_max)}{swap}, pids.max {cgroup.pids_max}; " + ", ".join(rlimits)
    return ", ".join(rlimits) + (f"; cgroup v2 not used: {why_not}" if why_not else "")
