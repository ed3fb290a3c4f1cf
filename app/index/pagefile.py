"""Reading a page file: the one way the service opens anything under the wiki folder.

A wiki folder can change between finding a file and reading it (`serve --watch`
reindexes while an editor, or an attacker with write access, swaps files). So a
page is never opened by a path the kernel resolves through links: the wiki
folder is opened once, each folder below it is opened relative to its parent
with `O_NOFOLLOW`, and the file itself too. What was opened is then checked
with `fstat` on the descriptor: it must be a regular file (not a FIFO, device
or folder) no larger than `PAGE_MAX_BYTES`. Only then is it read, from that
descriptor. A link swapped in at any step makes the open fail instead of
leading outside.

A file link whose target stays inside the wiki is still a page (app/index/build.py's
walk keeps those): its target is resolved, checked to lie under the wiki's real
path, and opened the same way, component by component, from the wiki folder.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

PAGE_MAX_BYTES = 16 * 1024 * 1024
"""A page file larger than this is not read (the largest page of the bundled wiki is about 40 kB)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO opens at once, then fails fstat


class PageRefused(OSError):
    """A page file that is not read: a link leading out of the wiki, not a regular file, or too large."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EPERM, why)


def read_page(root: Path | str, rel: str) -> bytes:
    """The bytes of the page at `rel` (posix, relative to the wiki folder `root`), opened without following links.

    Raises PageRefused (an OSError whose `strerror` says why) or another OSError.
    """
    real_root = os.path.realpath(root)
    root_fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = _open_below(root_fd, rel)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):  # what O_NOFOLLOW answers for a link (file, folder)
                raise
            target = os.path.realpath(os.path.join(real_root, rel))
            if not target.startswith(real_root.rstrip(os.sep) + os.sep):
                raise PageRefused("the file links outside the wiki folder") from None
            fd = _open_below(root_fd, os.path.relpath(target, real_root))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PageRefused("not a regular file")
            if info.st_size > PAGE_MAX_BYTES:
                raise PageRefused(f"larger than {PAGE_MAX_BYTES} bytes")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            # What fstat announced, and one byte more to tell a file that grew since. Asking every page for
            # PAGE_MAX_BYTES + 1 gave each page's bytes a memory mapping of its own (the allocator shrinks a
            # large buffer where it lies), and a process may hold 65,530 (vm.max_map_count): a full index of
            # 100,000 pages failed at about that many.
            data = fh.read(min(info.st_size, PAGE_MAX_BYTES) + 1)
            if len(data) > info.st_size:  # grown since fstat: read on, up to the limit
                data += fh.read(PAGE_MAX_BYTES + 1 - len(data))
        if len(data) > PAGE_MAX_BYTES:
            raise PageRefused(f"larger than {PAGE_MAX_BYTES} bytes")
        return data
    finally:
        os.close(root_fd)


def _open_below(root_fd: int, rel: str) -> int:
    """A descriptor of `rel` under the folder `root_fd`, every component opened with O_NOFOLLOW."""
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PageRefused(f"not a plain relative path: {rel!r}")
    fd = root_fd
    try:
        for part in parts[:-1]:
            below = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = below
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        if fd != root_fd:
            os.close(fd)
