"""Finding processes a test's command may have left behind, and waiting (with a deadline) for them to go."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

GONE_DEADLINE_S = 10.0
"""How long killed processes get to disappear; far below the `sleep MARKER` lengths the tests use (≥ 1000 s)."""


def _state_and_cmdline(pid: str) -> tuple[str, bytes] | None:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return state, cmdline


def live_with(marker: str) -> list[int]:
    """Host processes (not zombies) whose command line contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or (seen := _state_and_cmdline(name)) is None:
            continue
        state, cmdline = seen
        if state != "Z" and marker in cmdline.replace(b"\0", b" ").decode(errors="replace"):
            found.append(int(name))
    return found


def gone(probe: Callable[[], list[int]], deadline_s: float = GONE_DEADLINE_S) -> list[int]:
    """Call `probe` until it finds nothing or `deadline_s` passes; what it found last (empty: everything is gone).
    A process that really survived is still there at the deadline, so `assert gone(…) == []` fails for it."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = probe()
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)
