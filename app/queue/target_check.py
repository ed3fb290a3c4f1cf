"""Can this machine serve a target? The GPU, the toolchain and the sandbox a GPU worker needs, or why not.

A worker refuses to start (WorkerRefused, naming what is missing and what the
target needs) rather than take jobs it would only fail.
"""

from __future__ import annotations

from typing import Any

from snippets.architectures import compute_capability_of


class WorkerRefused(Exception):
    """This machine cannot serve the requested target; the message says why."""


def check_target(target: str, gpus: list[Any] | None = None, toolchain: Any | None = None) -> tuple[Any, Any]:
    """The local GPU and toolchain that serve `target`, or WorkerRefused saying why not."""
    from runner.gpus import discover_gpus, driver_present, pick_gpu
    from runner.toolchain import discover_toolchain

    want = compute_capability_of(target)
    if want is None:
        raise WorkerRefused(f"unknown target '{target}': expected a form like sm_90a, sm_100a or sm_100f")
    if gpus is None:
        if not driver_present():
            raise WorkerRefused(
                f"no NVIDIA driver is loaded on this machine (/proc/driver/nvidia/version and /dev/nvidiactl are missing): "
                f"{target} needs a GPU of compute capability {want[0]}.{want[1]}"
            )
        gpus = discover_gpus()
    if not gpus:
        raise WorkerRefused(f"the NVIDIA driver answered but no GPU was found (CuPy, nvidia-smi): {target} needs one")
    gpu = pick_gpu(gpus, target)
    if gpu is None:
        have = ", ".join(f"{g.name} (compute capability {g.compute_capability})" for g in gpus)
        need = f"{want[0]}.{want[1]}" + (" or a later minor version" if want[2] else "")
        raise WorkerRefused(f"{target} programs run on GPUs of compute capability {need}; this machine has {have}")
    toolchain = toolchain or discover_toolchain()
    if not toolchain.nvcc:
        raise WorkerRefused(
            f"nvcc was not found ({'; '.join(toolchain.notes) or 'not on PATH'}): {target} snippets cannot be built"
        )
    return gpu, toolchain


def check_targets(targets: list[str], release: str | None = None) -> tuple[list[Any], Any]:
    """The local GPUs that serve all of `targets` (GPU discovery and toolchain once), or WorkerRefused.

    `release` (KERNELWIKI_TOOLCHAIN): an installed CUDA release (runner/toolchains.py) instead of the nvcc on PATH;
    the worker advertises it as the toolchain label of its evidence and of the jobs it skips."""
    from runner.gpus import discover_gpus, driver_present
    from runner.toolchain import discover_toolchain
    from runner.toolchains import ToolchainError, select_toolchain, toolchains_dir

    if not targets:
        raise WorkerRefused("give the target(s) to serve, e.g. --target sm_90a")
    try:
        toolchain = select_toolchain(release, toolchains_dir().resolve()) if release else discover_toolchain()
    except ToolchainError as exc:
        raise WorkerRefused(f"KERNELWIKI_TOOLCHAIN: {exc}") from None
    gpus = discover_gpus() if driver_present() else None
    chosen: list[Any] = []
    for target in targets:
        gpu, _ = check_target(target, gpus, toolchain)
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen, toolchain


def check_sandbox(isolation: str | None) -> str:
    """The isolation jobs will run under; WorkerRefused when it cannot be used here (nothing runs unsandboxed)."""
    from runner.sandbox import SandboxUnavailable, detect_isolation

    try:
        return detect_isolation(isolation)
    except (SandboxUnavailable, ValueError) as exc:
        raise WorkerRefused(str(exc)) from None
