"""Which isolation is in force: each level checked once per process by running it, never chosen silently."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from runner.sandbox.environment import sandbox_environment
from runner.sandbox.errors import SandboxUnavailable
from runner.sandbox.wrapper import bwrap_prefix, find_bwrap, unshare_prefix
from runner.seccomp import SeccompUnsupported, filter_fd
from runner.settings import (
    ISOLATION_AUTO,
    ISOLATION_BWRAP,
    ISOLATION_NONE,
    ISOLATION_UNSHARE,
    RunnerSettings,
    normalize_isolation,
    runner_settings,
)

ISOLATION_PROBE_TIMEOUT_S = 15
"""Limit for the one-off check that an isolation wrapper works on this machine."""


INSTALL_HINT = (
    "bubblewrap is required to compile and run snippets: install it (Debian/Ubuntu: `apt-get install bubblewrap`, "
    "Fedora/RHEL: `dnf install bubblewrap`) or point KERNELWIKI_BWRAP at the binary; "
    "to accept weaker isolation explicitly, pass `--isolation unshare-net` or `--isolation none` "
    "(setting KERNELWIKI_ISOLATION)"
)


def _probe(argv: list[str], cwd: Path, pass_fds: tuple[int, ...] = ()) -> str | None:
    """None when `argv` ran and exited 0, else what went wrong."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            pass_fds=pass_fds,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=ISOLATION_PROBE_TIMEOUT_S,
            env=sandbox_environment(cwd),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return (done.stderr or done.stdout).decode(errors="replace").strip()[-300:] or f"exit status {done.returncode}"


_isolation_lock = threading.Lock()
_isolation_cache: dict[tuple[str, str | None], str | None] = {}

_NET_CHECK = (
    "import os,sys; sys.exit(0 if [l.split(':')[0].strip() for l in "
    "open('/proc/self/net/dev').read().splitlines()[2:]] == ['lo'] else 3)"
)
"""The probe must show what the wrapper promises: only the loopback interface."""


def isolation_problem(level: str, settings: RunnerSettings | None = None) -> str | None:
    """None when `level` (bwrap, unshare-net, none) works here (checked once, by running it), else why not."""
    settings = settings or runner_settings()
    if level == ISOLATION_NONE:
        return None
    key = (level, settings.bwrap)
    with _isolation_lock:
        if key in _isolation_cache:
            return _isolation_cache[key]
        with tempfile.TemporaryDirectory(prefix="kw-probe-") as tmp:
            probe_dir = Path(tmp)
            check = [sys.executable, "-I", "-S", "-c", _NET_CHECK]
            if level == ISOLATION_BWRAP:
                bwrap = find_bwrap(settings)
                if not bwrap:
                    where = f"KERNELWIKI_BWRAP={settings.bwrap} is not executable" if settings.bwrap else "no `bwrap` on PATH"
                    problem: str | None = f"{where}; {INSTALL_HINT}"
                else:
                    try:
                        seccomp = filter_fd()
                    except (SeccompUnsupported, OSError) as exc:
                        failed: str | None = f"no seccomp filter: {exc}"
                    else:
                        try:
                            prefix = bwrap_prefix(bwrap, probe_dir, settings, None, False, seccomp_fd=seccomp)
                            failed = _probe(prefix + check, probe_dir, (seccomp,))
                        finally:
                            os.close(seccomp)
                    problem = f"{bwrap} cannot create a sandbox here ({failed}); {INSTALL_HINT}" if failed else None
            elif level == ISOLATION_UNSHARE:
                unshare = shutil.which("unshare")
                failed = _probe(unshare_prefix(unshare) + check, probe_dir) if unshare else "no `unshare` on PATH"
                problem = f"unshare cannot create network and pid namespaces here ({failed})" if failed else None
            else:
                problem = f"unknown isolation {level!r}"
        _isolation_cache[key] = problem
        return problem


def detect_isolation(wanted: str | None = None, settings: RunnerSettings | None = None) -> str:
    """The isolation that will be in force for `wanted` (default: the setting, bwrap).

    `auto` is the strongest that works (an explicit request for a possible
    fallback); any other level is returned only if it works, else
    SandboxUnavailable is raised with the reason and how to install bubblewrap.
    """
    settings = settings or runner_settings()
    level = normalize_isolation(wanted or settings.isolation)
    if level == ISOLATION_AUTO:
        for candidate in (ISOLATION_BWRAP, ISOLATION_UNSHARE):
            if isolation_problem(candidate, settings) is None:
                return candidate
        return ISOLATION_NONE
    problem = isolation_problem(level, settings)
    if problem:
        raise SandboxUnavailable(problem)
    return level
