"""cgroup v2 limits per command: where the runner may create cgroups, why it falls back, what it writes,
how it reads which limit a command ran into, and that the launcher moves the command in before it execs.

The decisions run against folder trees shaped like /sys/fs/cgroup (the layouts of a unified host, of the
H200 job container and of this hybrid CPU machine); the kernel's own behaviour (memory.max kills,
pids.max refusals) is checked on a machine with a writable cgroup v2 by the `gpu` tests of
test_sandbox_hostile.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cgroup import (
    RUN_PREFIX,
    CgroupUnavailable,
    CgroupUsage,
    RunCgroup,
    cgroup2_mount,
    cgroup_parent,
    delegation_parent,
    own_cgroup,
)
from runner.sandbox import (
    ISOLATION_BWRAP,
    ISOLATION_NONE,
    GiB,
    Limits,
    ProcessResult,
    describe_limits,
    isolation_problem,
    resource_limit_hit,
    run_process,
    runner_settings,
)
from runner.settings import RunnerSettings, normalize_cgroup
from tests.ci import missing_cgroup

LAUNCHER = Path(__file__).resolve().parents[2] / "runner" / "launch.py"
ALL = "cpuset cpu io memory hugetlb pids"


def _cgroup(folder: Path, controllers: str = "", subtree: str = "", procs: str = "") -> Path:
    """A folder with the interface files the detection reads."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers + "\n")
    (folder / "cgroup.subtree_control").write_text(subtree + "\n")
    (folder / "cgroup.procs").write_text(procs)
    return folder


def _self(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "self-cgroup"
    path.write_text(text)
    return path


# -- where the command cgroups go -----------------------------------------------------------------------------


def test_cgroup2_mount_is_found_on_unified_and_hybrid_hosts_and_missing_on_v1_only(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "24 30 0:22 / /sys rw - sysfs sysfs rw\n31 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    assert cgroup2_mount(info) == (Path("/sys/fs/cgroup"), "/")
    info.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "41 31 0:38 /kube/pod\\0401 /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    assert cgroup2_mount(info) == (Path("/sys/fs/cgroup/unified"), "/kube/pod 1")
    info.write_text("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert cgroup2_mount(info) is None
    assert cgroup2_mount(tmp_path / "absent") is None


def test_commands_go_below_the_runners_cgroup_when_its_subtree_enables_memory_and_pids(tmp_path: Path) -> None:
    root = _cgroup(tmp_path / "cg", ALL, "memory pids")
    own = _cgroup(root / "runner.slice", ALL, "cpu memory pids")
    assert delegation_parent(root, _self(tmp_path, "0::/runner.slice\n")) == own
    assert delegation_parent(root, _self(tmp_path, "0::/\n")) == root  # the real root: no internal-process rule


def test_commands_go_beside_the_runner_when_its_own_cgroup_holds_processes(tmp_path: Path) -> None:
    """The H200 job container: /proc/self/cgroup is 0::/process_api/<id>, /sys/fs/cgroup is the job's cgroup."""
    root = _cgroup(tmp_path / "cg", ALL, ALL)
    api = _cgroup(root / "process_api", ALL, ALL)
    _cgroup(api / "c0ffee", ALL, "", procs="4242\n")
    own = tmp_path / "self"
    own.write_text("0::/process_api/c0ffee\n")
    assert delegation_parent(root, own) == api
    assert own_cgroup(root, own) == api / "c0ffee"


def test_commands_go_below_the_nearest_ancestor_that_enables_memory_and_pids(tmp_path: Path) -> None:
    root = _cgroup(tmp_path / "cg", ALL, ALL)
    api = _cgroup(root / "process_api", "cpu memory pids", "cpu")
    _cgroup(api / "c0ffee", "cpu", "", procs="4242\n")
    assert delegation_parent(root, _self(tmp_path, "0::/process_api/c0ffee\n")) == root


def test_a_mount_of_part_of_the_hierarchy_maps_the_runners_cgroup_below_it(tmp_path: Path) -> None:
    root = _cgroup(tmp_path / "cg", ALL, ALL)
    _cgroup(root / "job", ALL, "")
    me = _self(tmp_path, "0::/kube/pod 1/job\n")
    assert own_cgroup(root, me, "/kube/pod 1") == root / "job"
    assert delegation_parent(root, me, "/kube/pod 1") == root
    with pytest.raises(CgroupUnavailable, match="outside the part /elsewhere mounted"):
        own_cgroup(root, me, "/elsewhere")


@pytest.mark.parametrize(
    ("self_text", "layout", "reason"),
    [
        ("4:memory:/x\n1:cpu:/\n", {}, r"no cgroup v2 entry \(0::\): cgroup v1 only"),
        ("0::/../../outside\n", {}, "lies outside the cgroup namespace"),
        ("0::/gone\n", {}, "is not at"),
        ("0::/\n", {"": ("hugetlb", "")}, r"offers no memory or pids controller to this process \(controllers: hugetlb\)"),
        ("0::/job\n", {"": ("memory pids", "memory"), "job": ("memory", "")}, "offers no pids controller"),
        ("0::/\n", {"": ("memory pids", "")}, "top of the visible hierarchy and holds processes"),
    ],
    ids=[
        "cgroup-v1-only",
        "other-namespace",
        "own-folder-missing",
        "hugetlb-only-like-this-cpu-machine",
        "no-pids-delegated",
        "namespace-root-with-processes",
    ],
)
def test_each_reason_to_fall_back_is_named(
    tmp_path: Path, self_text: str, layout: dict[str, tuple[str, str]], reason: str
) -> None:
    root = tmp_path / "cg"
    root.mkdir()
    for folder, (controllers, subtree) in layout.items():
        _cgroup(root / folder, controllers, subtree)
    with pytest.raises(CgroupUnavailable, match=reason):
        delegation_parent(root, _self(tmp_path, self_text))


def test_this_machines_verdict_agrees_with_its_cgroup_files() -> None:
    """Here (a hybrid host whose cgroup v2 offers only hugetlb) the runner must fall back and say why; on a
    host that delegates memory and pids it must find a place, unless the runner's cgroup is the namespace top."""
    parent, problem = cgroup_parent(None)
    assert (parent is None) != (problem is None)
    mount = cgroup2_mount()
    if mount is None:
        assert problem == "no cgroup v2 file system is mounted"
        return
    try:
        own = own_cgroup(mount[0], mount_root=mount[1])
    except CgroupUnavailable as exc:
        assert problem == str(exc)
        return
    below = {"memory", "pids"} <= set((own / "cgroup.subtree_control").read_text().split())
    beside = {"memory", "pids"} <= set((own / "cgroup.controllers").read_text().split())
    if not below and not beside and own == mount[0]:
        assert problem and "controller" in problem and parent is None
    elif parent is not None:
        assert parent == own or parent in own.parents


# -- one command's cgroup ---------------------------------------------------------------------------------------


def test_a_command_cgroup_gets_memory_swap_oom_group_and_pids_limits(tmp_path: Path) -> None:
    parent = _cgroup(tmp_path / "cg", ALL, "memory pids")
    group = RunCgroup.create(parent, 8 * GiB, 512)
    assert group.path.parent == parent and group.path.name.startswith(f"{RUN_PREFIX}{os.getpid()}-")
    written = {
        name: (group.path / name).read_text() for name in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max")
    }
    assert written == {"memory.max": str(8 * GiB), "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "512"}
    assert group.usage().no_swap
    second = RunCgroup.create(parent, GiB, 8)
    assert second.path != group.path


def test_a_parent_that_cannot_take_children_is_a_clear_fallback(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="cannot create .*kernelwiki-run-"):
        RunCgroup.create(tmp_path / "missing", GiB, 8)


def test_usage_reads_oom_kills_pids_refusals_and_the_peak_in_the_kernels_format(tmp_path: Path) -> None:
    group = RunCgroup.create(_cgroup(tmp_path / "cg", ALL, "memory pids"), 8 * GiB, 200)
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 1233\noom 1\noom_kill 2\noom_group_kill 1\n")
    (group.path / "pids.events").write_text("max 57\n")
    (group.path / "memory.peak").write_text("8589930496\n")
    usage = group.usage()
    assert (usage.oom_kills, usage.memory_max_hits, usage.pids_max_hits, usage.memory_peak) == (2, 1233, 57, 8589930496)
    assert (usage.memory_max, usage.pids_max, usage.path) == (8 * GiB, 200, str(group.path))


def test_a_cgroup_that_cannot_be_removed_yet_is_removed_before_the_next_one_is_made(tmp_path: Path) -> None:
    parent = _cgroup(tmp_path / "cg", ALL, "memory pids")
    group = RunCgroup.create(parent, GiB, 8)
    assert group.remove(wait_s=0) is False  # a plain folder with files in it: rmdir refuses, as for a busy cgroup
    assert group.path.is_dir()
    for name in os.listdir(group.path):
        os.unlink(group.path / name)
    RunCgroup.create(parent, GiB, 8)
    assert not group.path.exists()


# -- classifying what stopped a command --------------------------------------------------------------------------


def _result(exit_code: int | None, sig: int | None, output: str, usage: CgroupUsage | None) -> ProcessResult:
    res = ProcessResult(["prog"], exit_code, sig, False, 1.0, cgroup=usage)
    res.stdout.text = output
    return res


def test_the_cgroup_counters_name_the_limit_exactly() -> None:
    limits = Limits(address_space_bytes=None, data_bytes=8 * GiB, processes=200)
    killed = CgroupUsage("/cg/x", 8 * GiB, 200, oom_kills=1, memory_max_hits=40)
    assert resource_limit_hit(_result(-9, 9, "", killed), limits) == (
        "host memory limit (cgroup memory.max 8 GiB) reached: the kernel killed 1 process(es) of it"
    )
    refused = CgroupUsage("/cg/x", 8 * GiB, 200, pids_max_hits=3)
    assert resource_limit_hit(_result(1, None, "spawned 199", refused), limits) == (
        "process limit (cgroup pids.max 200 processes and threads) reached"
    )
    # both: the failed allocation ended the program, whatever it ran into before
    assert resource_limit_hit(_result(1, None, "forks 511\nmalloc: Cannot allocate memory", refused), limits) == (
        "host memory limit (RLIMIT_DATA 8 GiB) reached"
    )
    # no counter: the resource limits' signs in the output, as without a cgroup
    quiet = CgroupUsage("/cg/x", 8 * GiB, 200, memory_max_hits=5)
    assert resource_limit_hit(_result(1, None, "MemoryError", quiet), limits) == "host memory limit (RLIMIT_DATA 8 GiB) reached"
    assert resource_limit_hit(_result(-9, 9, "", quiet), limits) is None  # killed, but not by its memory limit
    assert resource_limit_hit(_result(0, None, "", killed), limits) is None  # a helper was killed, the program passed


def test_the_limits_in_force_are_described_for_the_evidence() -> None:
    limits = Limits(file_size_bytes=256 << 20, address_space_bytes=None, data_bytes=8 * GiB)
    usage = CgroupUsage("/cg/x", 8 * GiB, 512)
    assert describe_limits(limits, usage) == (
        "cgroup v2 memory.max 8 GiB (no swap), pids.max 512; RLIMIT_DATA 8 GiB, "
        "RLIMIT_NPROC 512, RLIMIT_NOFILE 4096, RLIMIT_FSIZE 256 MiB"
    )
    assert describe_limits(limits, CgroupUsage("/cg/x", GiB, 64, no_swap=False)).startswith(
        "cgroup v2 memory.max 1 GiB, pids.max 64; "
    )
    assert describe_limits(limits, None, "cgroup v2 at /x offers no memory controller").endswith(
        "RLIMIT_FSIZE 256 MiB; cgroup v2 not used: cgroup v2 at /x offers no memory controller"
    )


def test_the_cgroup_setting_reads_auto_off_and_require() -> None:
    assert RunnerSettings.from_env({}).cgroup == "auto"
    assert RunnerSettings.from_env({"KERNELWIKI_CGROUP": "Off"}).cgroup == "off"
    assert RunnerSettings.from_env({"KERNELWIKI_CGROUP": "required", "KERNELWIKI_CGROUP_ROOT": "/cg "}).cgroup_root == "/cg"
    assert normalize_cgroup("on") == "require"
    with pytest.raises(ValueError, match="KERNELWIKI_CGROUP='maybe': unknown cgroup mode"):
        RunnerSettings.from_env({"KERNELWIKI_CGROUP": "maybe"})


# -- the launcher moves the command in before it execs -------------------------------------------------------------


def _mirror_own_cgroup(tmp_path: Path) -> Path:
    """A tree whose copy of this process's cgroup enables memory and pids for children (as if delegated)."""
    text = Path("/proc/self/cgroup").read_text()
    entry = next((ln[3:] for ln in text.splitlines() if ln.startswith("0::")), None)
    if entry is None or "/.." in entry:
        missing_cgroup(f"no usable cgroup v2 entry in /proc/self/cgroup: {text!r}")
    root = tmp_path / "cgroot"
    _cgroup(root, ALL, "memory pids")
    own = root / entry.strip("/") if entry.strip("/") else root
    _cgroup(own, ALL, "memory pids")
    return own


def _levels() -> list[str]:
    return [ISOLATION_NONE] + ([ISOLATION_BWRAP] if isolation_problem(ISOLATION_BWRAP) is None else [])


@pytest.mark.parametrize("isolation", _levels())
def test_the_launcher_writes_the_commands_own_pid_into_its_cgroup_before_it_runs(tmp_path: Path, isolation: str) -> None:
    """The pid written to cgroup.procs is the pid the command itself sees (`$$`, inside bubblewrap's pid
    namespace too): the command is in the cgroup from its first instruction."""
    parent = _mirror_own_cgroup(tmp_path)
    settings = RunnerSettings(cgroup_root=str(tmp_path / "cgroot"))
    work = tmp_path / "work"
    work.mkdir()
    limits = Limits(address_space_bytes=None, data_bytes=3 * GiB, processes=64)
    res = run_process(["sh", "-c", "echo pid=$$"], work, 20, limits=limits, isolation=isolation, settings=settings)
    assert res.error is None and res.exit_code == 0, res.output
    made = sorted(parent.glob(f"{RUN_PREFIX}{os.getpid()}-*"))
    assert len(made) == 1  # the tree's folders are not kernel cgroups: removal is left pending
    assert (made[0] / "cgroup.procs").read_text() == res.stdout.text.strip().removeprefix("pid=")
    assert (made[0] / "memory.max").read_text() == str(3 * GiB) and (made[0] / "pids.max").read_text() == "64"
    assert res.cgroup is not None and res.cgroup.path == str(made[0])
    assert res.limits_in_force.startswith("cgroup v2 memory.max 3 GiB (no swap), pids.max 64; RLIMIT_DATA 3 GiB")
    for name in os.listdir(made[0]):
        os.unlink(made[0] / name)
    os.rmdir(made[0])


def test_required_cgroup_limits_run_nothing_where_there_are_none(tmp_path: Path) -> None:
    root = _cgroup(tmp_path / "cgroot", "hugetlb", "")
    settings = RunnerSettings(cgroup="require", cgroup_root=str(root))
    res = run_process(["sh", "-c", "touch ran"], tmp_path, 20, isolation=ISOLATION_NONE, settings=settings)
    assert res.error is not None and res.error.startswith(
        "not run: cgroup v2 limits are required (KERNELWIKI_CGROUP=require) but "
    )
    assert not (tmp_path / "ran").exists()
    off = run_process(["true"], tmp_path, 20, isolation=ISOLATION_NONE, settings=RunnerSettings(cgroup="off"))
    assert (
        off.exit_code == 0
        and off.cgroup is None
        and off.limits_in_force.endswith("; cgroup v2 not used: off (KERNELWIKI_CGROUP=off)")
    )


@pytest.mark.parametrize("required", [True, False])
def test_a_command_that_cannot_join_its_cgroup_runs_only_when_the_cgroup_is_not_required(tmp_path: Path, required: bool) -> None:
    """/dev/full as cgroup.procs: the write fails (ENOSPC) as a refused migration would."""
    status_r, status_w = os.pipe()
    full = os.open("/dev/full", os.O_WRONLY)
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(LAUNCHER),
        "--status-fd",
        str(status_w),
        "--timeout",
        "20",
        "--cgroup-fd",
        str(full),
        "--cgroup-required",
        "1" if required else "0",
        "--",
        "touch",
        "ran",
    ]
    done = subprocess.run(argv, cwd=tmp_path, pass_fds=(status_w, full), capture_output=True, text=True, timeout=60)
    os.close(status_w)
    os.close(full)
    with os.fdopen(status_r, "rb") as fh:
        report = json.loads(fh.read())
    assert report["cgroup"] == "cannot move the command into its cgroup: No space left on device"
    if required:
        assert report["error"] == "not run: cannot move the command into its cgroup: No space left on device"
        assert report["exit_code"] == 127 and not (tmp_path / "ran").exists()
        assert "could not join its cgroup" in done.stderr
    else:
        assert report["error"] is None and report["exit_code"] == 0 and (tmp_path / "ran").exists()


def test_a_run_record_names_the_limits_that_held_it(tmp_path: Path) -> None:
    """Through verify(): a python `run` block (handed a device description; it never touches a GPU) gets a
    record whose resources say which mechanisms were in force here: the cgroup where one can be made, else
    the resource limits and why there was no cgroup."""
    from runner.gpus import Gpu
    from runner.verify import verify
    from snippets import extract_snippets

    snippets, _ = extract_snippets("p", "p.md", '```python run output="ok"\nprint("ok")\n```\n', 1, ["sm90a"])
    device = Gpu(index=0, name="described device", compute_capability="9.0")
    report = verify(".", snippets=snippets, cache_dir=tmp_path, use_cache=False, gpus=[device], isolation=ISOLATION_NONE)
    run = [r for r in report.records if r.step == "run"]
    assert [r.status for r in run] == ["pass"], [r.message for r in run]
    limits = run[0].resources["limits"]
    if runner_settings().cgroup == "off":
        pytest.skip("KERNELWIKI_CGROUP=off in this environment")
    parent, problem = cgroup_parent(runner_settings().cgroup_root)
    if parent is None:
        assert (
            limits
            == f"RLIMIT_DATA 8 GiB, RLIMIT_NPROC 512, RLIMIT_NOFILE 4096, RLIMIT_FSIZE 256 MiB; cgroup v2 not used: {problem}"
        )
    else:
        assert limits.startswith("cgroup v2 memory.max 8 GiB") and "RLIMIT_DATA 8 GiB" in limits


def test_required_cgroup_names_what_is_missing_or_is_satisfied() -> None:
    """A GPU worker (KERNELWIKI_CGROUP=require by default) refuses to start with this reason where no cgroup v2 with
    the memory and pids controllers can be made; elsewhere there is no problem."""
    from runner.cgroup import cgroup_parent
    from runner.sandbox import cgroup_problem
    from runner.settings import RunnerSettings

    assert cgroup_problem(RunnerSettings(cgroup="auto")) is None
    parent, _ = cgroup_parent(None)
    problem = cgroup_problem(RunnerSettings(cgroup="require"))
    if parent is None:
        assert problem is not None and "KERNELWIKI_CGROUP=require" in problem
    else:
        assert problem is None
