"""A fresh folder for each build or run: a size-capped tmpfs where the runner may mount one (as root)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

from runner.sandbox.uids import runner_is_root
from runner.settings import GiB

SNIPPET_FOLDER_BYTES = 1 * GiB
"""Size of the tmpfs a snippet's folder is (where the runner may mount one: as root)."""


_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_mounted_lock = threading.Lock()
_mounted: set[str] = set()


_STALE_NAME = re.compile(r"^kw-[a-z]+-(\d+)-[A-Za-z0-9_]+$")
_swept: list[bool] = []


def sweep_stale_workdirs() -> int:
    """Unmount and remove the folder tmpfs mounts of runner processes that are gone (killed mid-build: their folder
    names carry their pid); returns how many. Runs once per process, at its first new_workdir."""
    import ctypes

    tmp = os.path.realpath(tempfile.gettempdir())
    removed = 0
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            points = [line.split()[4] for line in fh if len(line.split()) > 4]
    except OSError:
        return 0
    for point in points:
        m = _STALE_NAME.match(os.path.basename(point))
        if not m or os.path.dirname(point) != tmp or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # its process is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        if ctypes.CDLL(None, use_errno=True).umount2(point.encode(), _MNT_DETACH) == 0:
            shutil.rmtree(point, ignore_errors=True)
            removed += 1
    return removed


def new_workdir(prefix: str) -> Path:
    """A fresh folder for one build or run: a tmpfs of SNIPPET_FOLDER_BYTES where this process may mount one (as
    root), so that what a snippet writes there is capped in all, not only per file; else a plain folder. Its name
    carries this process's pid, so that a later runner can remove it when this one was killed."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    if not runner_is_root():
        return path
    with _mounted_lock:
        first = not _swept
        _swept.append(True)
    if first:
        sweep_stale_workdirs()
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={SNIPPET_FOLDER_BYTES},mode=0700".encode()
    if libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0:
        with _mounted_lock:
            _mounted.add(str(path))
    return path


def folder_capped(workdir: Path | str) -> bool:
    """Is `workdir` a size-capped tmpfs of new_workdir's?"""
    with _mounted_lock:
        return str(workdir) in _mounted


def remove_workdir(path: Path | str) -> None:
    """Remove a folder of new_workdir's (unmounting its tmpfs first)."""
    path = str(path)
    with _mounted_lock:
        mounted = path in _mounted
        _mounted.discard(path)
    if mounted:
        import ctypes

        ctypes.CDLL(None, use_errno=True).umount2(path.encode(), _MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)
