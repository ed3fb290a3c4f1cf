"""User ids of their own for sandboxed commands when the runner is root (RLIMIT_NPROC counts per user)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from runner.sandbox.errors import SandboxUnavailable
from runner.settings import RunnerSettings

UID_SLOTS = 256
"""Concurrent sandboxes per runner process that get a user id of their own (when the runner is root)."""


def runner_is_root() -> bool:
    """Is the runner root? Then each command runs as a user id of its own, and its folder is a tmpfs of its own."""
    return os.geteuid() == 0


_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()


def take_uid(settings: RunnerSettings) -> int:
    """A user id no other sandbox of this process is using (RLIMIT_NPROC counts per user)."""
    base = settings.sandbox_uid + (os.getpid() % 1000) * UID_SLOTS
    with _uid_lock:
        for slot in range(UID_SLOTS):
            if base + slot not in _uids_in_use:
                _uids_in_use.add(base + slot)
                return base + slot
    raise SandboxUnavailable(f"more than {UID_SLOTS} sandboxes at once")


def give_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


def chown_tree(root: Path, uid: int) -> None:
    """Give the sandbox's user id its folder (0711: bubblewrap, root without capabilities, must enter it)."""
    os.chown(root, uid, uid)
    os.chmod(root, 0o711)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
