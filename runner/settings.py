"""Runner settings: the one place the runner reads its configuration from the environment.

The service (app/settings.py) and the CLIs build a `RunnerSettings` once and
pass it down; `RunnerSettings.from_env()` is what a bare `python3 -m runner`
uses. Standard library only (the runner runs on GPU nodes without the web stack).

Environment variables (all optional):

* `KERNELWIKI_ISOLATION`: `bwrap` (default), `unshare-net`, `none` or `auto`
  (the strongest that works). Anything weaker than bwrap must be asked for.
* `KERNELWIKI_BWRAP`: path of the bubblewrap binary (default: `bwrap` on PATH).
* `KERNELWIKI_RUNNER_ENV`: extra environment variable names passed into the
  sandbox, comma-separated (everything not on the allow-list is dropped).
* `KERNELWIKI_SANDBOX_BIND`: extra host paths bound read-only into the
  sandbox, separated by `:` (e.g. a toolchain in an unusual place).
* `KERNELWIKI_RUN_MEMORY`: host memory of one GPU program (cgroup `memory.max` where
  usable, and RLIMIT_DATA), e.g. `8G`.
* `KERNELWIKI_CGROUP`: `auto` (default: a cgroup v2 of its own per command, with
  `memory.max` and `pids.max`, where the runner can create one; else the resource
  limits alone), `off`, or `require` (nothing runs without it).
* `KERNELWIKI_CGROUP_ROOT`: where cgroup v2 is mounted (default: found in
  /proc/self/mountinfo).
* `KERNELWIKI_SANDBOX_UID`: first of the user ids sandboxed commands run as when
  the runner is root (each concurrent sandbox gets its own, so that the process
  limit counts per sandbox).
* `KERNELWIKI_NVCC`, `KERNELWIKI_PTXAS`, `KERNELWIKI_CUOBJDUMP`,
  `KERNELWIKI_NVDISASM`: the CUDA tools to use (default: found on PATH, beside
  nvcc, under CUDA_HOME or /usr/local/cuda; runner/toolchain.py).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace

ISOLATION_BWRAP = "bwrap"
ISOLATION_UNSHARE = "unshare-net"
ISOLATION_NONE = "none"
ISOLATION_AUTO = "auto"
ISOLATION_CHOICES = (ISOLATION_BWRAP, ISOLATION_UNSHARE, ISOLATION_NONE, ISOLATION_AUTO)

CGROUP_AUTO = "auto"
CGROUP_OFF = "off"
CGROUP_REQUIRE = "require"
CGROUP_CHOICES = (CGROUP_AUTO, CGROUP_OFF, CGROUP_REQUIRE)

MiB = 1024 * 1024
GiB = 1024 * MiB

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.I)


def parse_size(text: str) -> int:
    """`8G`, `512M`, `4096` (bytes) → bytes; ValueError for anything else."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 8G, 512M, 1073741824)")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": MiB, "g": GiB, "t": 1024 * GiB}[m.group(2).lower()]


def normalize_cgroup(value: str) -> str:
    """`auto`, `off` (also `no`, `0`), `require` (also `required`, `on`) → the canonical name; ValueError otherwise."""
    v = {"no": CGROUP_OFF, "0": CGROUP_OFF, "false": CGROUP_OFF, "required": CGROUP_REQUIRE, "on": CGROUP_REQUIRE}.get(
        value.strip().lower(), value.strip().lower()
    )
    if v not in CGROUP_CHOICES:
        raise ValueError(f"unknown cgroup mode {value!r}: choose one of {', '.join(CGROUP_CHOICES)}")
    return v


def normalize_isolation(value: str) -> str:
    """`BWRAP`, `unshare`, `unshare-net`, `none`, `auto` → the canonical name; ValueError otherwise."""
    v = value.strip().lower()
    if v == "unshare":
        v = ISOLATION_UNSHARE
    if v not in ISOLATION_CHOICES:
        raise ValueError(f"unknown isolation {value!r}: choose one of {', '.join(ISOLATION_CHOICES)}")
    return v


@dataclass(frozen=True)
class RunnerSettings:
    """How the runner sandboxes compiles and runs."""

    isolation: str = ISOLATION_BWRAP  # required isolation; weaker levels only when asked for
    bwrap: str | None = None  # bubblewrap binary (None: `bwrap` on PATH)
    extra_env: tuple[str, ...] = ()  # extra variable names allowed into the sandbox
    extra_binds: tuple[str, ...] = ()  # extra host paths bound read-only
    run_memory_bytes: int = 8 * GiB  # host memory of a GPU program: cgroup memory.max and RLIMIT_DATA
    cgroup: str = CGROUP_AUTO  # cgroup v2 memory/pids limits per command: auto, off, require
    cgroup_root: str | None = None  # cgroup v2 mount point (None: from /proc/self/mountinfo)
    sandbox_uid: int = 1_500_000  # first user id sandboxed commands run as when the runner is root
    nvcc: str | None = None  # nvcc to use (None: PATH, then /usr/local/cuda/bin)
    ptxas: str | None = None  # ptxas (None: beside nvcc, PATH, CUDA_HOME)
    cuobjdump: str | None = None  # cuobjdump (None: as ptxas, then the nvidia-cuda-cuobjdump wheel)
    nvdisasm: str | None = None  # nvdisasm (None: as cuobjdump)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunnerSettings:
        """Read the `KERNELWIKI_*` variables above; a bad value raises ValueError naming the variable."""
        env = os.environ if environ is None else environ
        base = cls()
        values: dict[str, object] = {}

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value and value.strip() else None

        parsers: tuple[tuple[str, str, object], ...] = (
            ("KERNELWIKI_ISOLATION", "isolation", normalize_isolation),
            ("KERNELWIKI_BWRAP", "bwrap", str.strip),
            ("KERNELWIKI_RUNNER_ENV", "extra_env", lambda v: tuple(n.strip() for n in v.split(",") if n.strip())),
            ("KERNELWIKI_SANDBOX_BIND", "extra_binds", lambda v: tuple(p for p in v.split(":") if p.strip())),
            ("KERNELWIKI_RUN_MEMORY", "run_memory_bytes", parse_size),
            ("KERNELWIKI_SANDBOX_UID", "sandbox_uid", int),
            ("KERNELWIKI_CGROUP", "cgroup", normalize_cgroup),
            ("KERNELWIKI_CGROUP_ROOT", "cgroup_root", str.strip),
            ("KERNELWIKI_NVCC", "nvcc", str.strip),
            ("KERNELWIKI_PTXAS", "ptxas", str.strip),
            ("KERNELWIKI_CUOBJDUMP", "cuobjdump", str.strip),
            ("KERNELWIKI_NVDISASM", "nvdisasm", str.strip),
        )
        for name, key, parse in parsers:
            if v := get(name):
                try:
                    values[key] = parse(v)  # type: ignore[operator]
                except ValueError as exc:
                    raise ValueError(f"{name}={v!r}: {exc}") from None
        return replace(base, **values)  # type: ignore[arg-type]


_settings_lock = threading.Lock()
_settings: list[RunnerSettings] = []


def runner_settings() -> RunnerSettings:
    """The settings read from the environment, once per process (what a call without `settings=` uses)."""
    with _settings_lock:
        if not _settings:
            _settings.append(RunnerSettings.from_env())
        return _settings[0]
