"""Running a built program on a GPU of the target's architecture, in a fresh folder and process.

Exit status 0 is a pass: programs check their own results and exit non-zero
when they are wrong. A crash (signal), a timeout (the whole process tree is
killed), or missing expected output is a failure; an unmatched target is
`skipped`, never a pass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.compile import Build
from runner.gpus import Gpu, missing_reason
from runner.metrics import MetricsPipe
from runner.outcome import StepOutcome, outcome_from_process
from runner.sandbox import (
    ProcessResult,
    new_workdir,
    remove_workdir,
    resource_limit_hit,
    run_limits,
    run_process,
    runner_settings,
)
from runner.toolchain import Toolchain
from snippets.snippet import Snippet

CRASHED = "crashed"
EXIT_STATUS = "non-zero exit status"
WRONG_OUTPUT = "wrong output"
RESOURCE_LIMIT = "resource limit"
BAD_METRICS = "bad metrics"
"""A program whose measurements (runner/metrics.py) were malformed, too large, or faster than the GPU's peak."""
"""A program stopped by one of its sandbox limits (host memory, processes, open files, file size)."""


def _hint(output: str) -> str:
    """The most telling line of a failed program's output: the last one mentioning an error, else the last one."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("[… ")]
    for line in reversed(lines):
        low = line.lower()
        if "error" in low or "fail" in low or "mismatch" in low or "wrong" in low:
            return line[:300]
    return lines[-1][:300] if lines else ""


@contextmanager
def program_folder(build: Build, prefix: str) -> Iterator[Path]:
    """A fresh folder holding the program of `build`, written from the bytes handed back through the sandbox (never
    copied from its build folder); removed afterwards."""
    rundir = new_workdir(prefix)
    try:
        for name in build.program or []:
            fd = os.open(rundir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755)
            with os.fdopen(fd, "wb") as fh:
                fh.write(build.program_files[name])
        yield rundir
    finally:
        remove_workdir(rundir)


def program_argv(build: Build, snippet: Snippet, toolchain: Toolchain) -> list[str]:
    """How the program of `build` is started in its folder: `./snippet`, or the Python of the toolchain on the script."""
    assert build.program
    if snippet.lang == "python":
        return [toolchain.python or "python3", build.program[0]]
    return [f"./{build.program[0]}"]


def run_on_gpu(
    argv: list[str],
    rundir: Path,
    timeout_s: float,
    gpu: Gpu,
    isolation: str | None,
    extra_env: dict[str, str] | None = None,
    extra_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """A program (or a profiler around it) on `gpu` in the sandbox: its device nodes, the run limits of the settings,
    and CUDA_VISIBLE_DEVICES naming that GPU alone."""
    env = {"CUDA_VISIBLE_DEVICES": gpu.visible_devices, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", **(extra_env or {})}
    limits = run_limits(runner_settings())
    return run_process(argv, rundir, timeout_s, limits=limits, isolation=isolation, extra_env=env, gpu=True, extra_fds=extra_fds)


def run_step(
    build: Build, snippet: Snippet, target: str, gpu: Gpu | None, toolchain: Toolchain, isolation: str | None = None
) -> StepOutcome:
    """Run the program of `build` on `gpu` (None: skipped) and judge it."""
    if build.outcome.status == "pass" and build.no_program:
        return StepOutcome(step="run", status="skipped", detail=build.no_program)
    if build.outcome.status != "pass" or not build.program:
        return StepOutcome(step="run", status="skipped", detail=f"not run: the compile step is {build.outcome.status}")
    if gpu is None:
        return StepOutcome(step="run", status="skipped", detail=f"not run: {missing_reason(target)}")
    missing = [name for name in build.program if not build.program_files.get(name)]
    if missing:
        return StepOutcome(step="run", status="error", detail=f"not run: {missing[0]} was not handed back by its build")
    limits = run_limits(runner_settings())
    with program_folder(build, "kw-run-") as rundir, MetricsPipe() as pipe:  # the harness's JSON: runner/metrics.py
        res = run_on_gpu(
            program_argv(build, snippet, toolchain), rundir, snippet.timeout, gpu, isolation, pipe.env(), (pipe.child_fd,)
        )
    metrics, metrics_problem = pipe.document()  # the pipe's reader has finished on leaving the block
    outcome = outcome_from_process(
        res, "run", gpu_name=gpu.name, compute_capability=gpu.compute_capability, driver_version=gpu.driver_version
    )
    outcome.metrics = metrics
    if res.limits_in_force:  # which mechanisms held it: cgroup v2 where usable, the resource limits always
        outcome.resources["limits"] = res.limits_in_force
    if res.cgroup is not None and res.cgroup.memory_peak is not None:
        outcome.resources["host_memory_peak_bytes"] = res.cgroup.memory_peak
    leftovers = f"; left {res.leftovers} process(es) behind (killed)" if res.leftovers else ""
    limit = None if res.error or res.timed_out else resource_limit_hit(res, limits)
    if res.error:
        outcome.status, outcome.detail = "error", f"could not run the program: {res.error}"
    elif limit:
        outcome.status, outcome.kind = "fail", RESOURCE_LIMIT
        hint = _hint(res.output)
        outcome.detail = f"resource limit: {limit}" + (f" ({hint})" if hint else "") + leftovers
    elif res.timed_out:
        outcome.status, outcome.kind = "timeout", "timeout"
        outcome.detail = f"still running after {snippet.timeout} s: killed with every process it started"
    elif res.signal is not None:
        outcome.status, outcome.kind = "fail", CRASHED
        hint = _hint(res.output)
        outcome.detail = f"crashed: killed by {res.signal_name}" + (f" ({hint})" if hint else "") + leftovers
    elif res.exit_code != 0:
        outcome.status, outcome.kind = "fail", EXIT_STATUS
        hint = _hint(res.output)
        outcome.detail = f"exit status {res.exit_code}" + (f": {hint}" if hint else "") + leftovers
    elif metrics_problem:
        outcome.status, outcome.kind = "fail", BAD_METRICS
        outcome.detail = metrics_problem + leftovers
        outcome.checks.append({"kind": "metrics", "pattern": "", "ok": False, "detail": metrics_problem})
    else:
        if snippet.output is not None:
            ok = snippet.output in res.stdout.text
            detail = "found" if ok else ("not found (stdout was truncated)" if res.stdout.truncated else "not found")
            outcome.checks.append({"kind": "output", "pattern": snippet.output, "ok": ok, "detail": detail})
            if not ok:
                outcome.status, outcome.kind = "fail", WRONG_OUTPUT
                outcome.detail = f"standard output does not contain '{snippet.output}'" + leftovers
                return outcome
        outcome.detail = "exit status 0" + leftovers
    return outcome
