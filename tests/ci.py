"""Which lane the suite runs in, and when a missing tool is a skip or a failure.

* **CI** (`CI` set to `true`, `1` or `yes`, as `.ci/run` does): a tool CI is meant to
  have is required there, so its absence fails the test instead of skipping it: nvcc,
  bubblewrap, PostgreSQL, Chromium, and cgroup v2 where the machine has it delegated
  (`cgroup_v2_delegated()`).
* **The GPU lane** (`KERNELWIKI_GPU_LANE=1`, as `deploy/offline/h200_verify.sh` sets on the
  H200): a missing NVIDIA GPU or CuPy fails the test. Elsewhere (CI has neither) those
  tests skip, saying why.

Everywhere else every such test skips with the reason, so a developer's machine without
the tool still runs the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

TRUE_WORDS = ("1", "true", "yes")
"""Values of CI / KERNELWIKI_GPU_LANE that turn the lane on (any case)."""


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in TRUE_WORDS


def is_ci() -> bool:
    """Is this a CI run (CI=true)?"""
    return _on("CI")


def gpu_lane() -> bool:
    """Is this the GPU lane (KERNELWIKI_GPU_LANE=1), where a GPU and CuPy are required?"""
    return _on("KERNELWIKI_GPU_LANE")


def cgroup_v2_delegated(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> bool:
    """Does this machine give the test process a cgroup v2 of its own to manage: the unified hierarchy mounted at
    `root`, this process's cgroup writable and offering the memory and pids controllers? Read independently of
    runner/cgroup.py, so that a regression there is a failure under CI, not a skip."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return False
    unified = [line.split("::", 1)[1] for line in lines if line.startswith("0::")]
    if not unified or not (root / "cgroup.controllers").is_file():
        return False
    own = root / unified[0].lstrip("/")
    try:
        controllers = (own / "cgroup.controllers").read_text().split()
    except OSError:
        return False
    return {"memory", "pids"} <= set(controllers) and os.access(own, os.W_OK)


def _missing(reason: str, required: bool, lane: str) -> NoReturn:
    if required:
        pytest.fail(f"{reason} (required under {lane})", pytrace=False)
    pytest.skip(reason)


def missing_tool(reason: str) -> NoReturn:
    """A tool CI is meant to have is missing: skip, but fail under CI=true."""
    _missing(reason, is_ci(), "CI=true")


def missing_cgroup(reason: str) -> NoReturn:
    """No usable cgroup v2: skip, but fail under CI=true where the machine has one delegated (or wherever
    KERNELWIKI_CGROUP=require says one must be used)."""
    if os.environ.get("KERNELWIKI_CGROUP", "").strip().lower() == "require":
        _missing(reason, True, "KERNELWIKI_CGROUP=require")
    _missing(reason, is_ci() and cgroup_v2_delegated(), "CI=true on a machine with cgroup v2 delegated")


def missing_gpu(reason: str) -> NoReturn:
    """No NVIDIA GPU (or no CuPy): skip, but fail in the GPU lane (KERNELWIKI_GPU_LANE=1)."""
    _missing(reason, gpu_lane(), "KERNELWIKI_GPU_LANE=1")


def require_cupy() -> object:
    """The cupy module: a skip where it is not installed, a failure in the GPU lane."""
    try:
        import cupy  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        missing_gpu(f"CuPy is not installed (pip install '.[gpu]'): {exc}")
    return cupy
