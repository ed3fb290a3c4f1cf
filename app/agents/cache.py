"""`/llms.txt` and `/llms-full.txt`, rendered once per data version into files every serving process shares.

Rendering `/llms-full.txt` costs every page's Markdown (at 5,000 pages 45-50 s of CPU and 17.6 MB),
so a document is rendered once per *version*: `/llms.txt` per index generation (it lists pages),
`/llms-full.txt` per data version (it also carries each snippet's evidence, so a posted record changes
it). Requests that arrive while a version is being rendered wait for that one rendering instead of
starting their own: in a process through app/cache.py's `LRU(wait=True)`, across the processes of
`serve --workers N` through an exclusive flock on the folder's lock file (the second process waits,
then reads the first one's file).

Documents live in files, not in each process's memory: at 100,000 pages `/llms.txt` alone is ~30 MB,
which every worker held twice over (its rendering and a copy per request), and `/llms-full.txt`
hundreds of MB. A document is written aside and renamed into `documents/` beside the host's full-text
index (app/search/folder.py), so a reader sees a whole file or none; it is sent in blocks. A file is
named by its key and the database's instance number (app/index/db.py `index_instance`): a database
made anew at the same place counts its generations from 1 again and must never be answered with the
old one's documents. The newest `KEEP_FILES` files stay; a file removed while a process was about to
send it is rendered again. A database with no folder (in-memory SQLite) or no instance number yet
gets a folder of the process's own, removed with it.

The base URL comes from the request's `Host`, which any client chooses: a document is rendered once
with a placeholder origin and the request's origin is put in as it is sent, so a new `Host` costs a
byte replacement, never a new rendering, and cannot push the rendered documents out of the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import tempfile
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy.engine import Connection

from app.cache import LRU
from app.index.db import index_instance

RENDERED_DOCUMENTS = 4
"""Documents a process keeps open descriptions of: both documents of the current version, and the previous ones while
requests that began before a reindex finish."""
KEEP_FILES = 8
"""Rendered files kept in the shared folder (the newest): room for every process's current and previous versions."""
HEADER_BYTES = 512
"""A file's first bytes: its description as JSON, padded with spaces (the document follows)."""
BLOCK_BYTES = 1 << 20
"""A document is read and sent in blocks of this size."""
LOCK = ".lock"
FOLDER = "documents"
"""The shared folder's name inside the host's full-text folder."""


def documents_dir(search_dir: Path | None) -> Path | None:
    """Where the rendered documents of the database whose full-text folder is `search_dir` live (None: no such folder)."""
    return None if search_dir is None else search_dir / FOLDER


@dataclass(frozen=True)
class Rendered:
    """One document of one version in its file, rendered with `placeholder` where the request's origin goes."""

    path: Path  # the file: HEADER_BYTES of description, then the document
    size: int  # the document's bytes
    placeholder: bytes  # the origin it was rendered with (random per rendering process)
    count: int  # how often `placeholder` occurs in it
    digest: str  # sha256 of the document as rendered (hex)

    def length(self, origin: str) -> int:
        """The bytes sent to a client that reached the service at `origin`."""
        return self.size + self.count * (len(origin.encode()) - len(self.placeholder))

    def etag(self, origin: str) -> str:
        """A strong ETag: it changes with the bytes sent, which depend on the rendering and the origin."""
        origin_part = hashlib.sha256(origin.encode()).hexdigest()[:8]
        return f'"{self.digest[:32]}-{origin_part}"'

    def open(self) -> IO[bytes]:
        """The document's file, at its first byte (FileNotFoundError once the file was removed as old)."""
        handle = open(self.path, "rb")  # noqa: SIM115  (closed by `send`'s caller through `blocks`)
        handle.seek(HEADER_BYTES)
        return handle

    def send(self, handle: IO[bytes], origin: str) -> Iterator[bytes]:
        """The document from an `open` handle, block by block, with `origin` put in; closes the handle."""
        with handle:
            yield from substituted(blocks(handle), self.placeholder, origin.encode())

    def text(self, origin: str) -> str:
        """The whole document for `origin` (tests and small callers)."""
        return b"".join(self.send(self.open(), origin)).decode()


class RenderedDocuments:
    """The rendered agent documents of one app (`app.state.agent_documents`), in files shared by the processes of one database."""

    def __init__(self, directory: Callable[[], Path | None], size: int = RENDERED_DOCUMENTS) -> None:
        self.renderings = 0  # documents rendered by this process (tests and benchmarks read it)
        self._shared = directory  # the shared folder, asked when a document is first needed (None: none)
        self._private: Path | None = None  # the process's own folder, made when first needed
        self._documents: LRU[Rendered] = LRU(size, wait=True)

    def get(self, conn: Connection, key: Hashable, render: Callable[[str], str | Iterable[str]]) -> Rendered:
        """The document for `key` (its name and version), rendered by `render(origin)` when no process has it."""
        return self._documents.get_or_make(key, lambda: self._file(conn, key, render))

    def forget(self, key: Hashable) -> None:
        """Drop what this process knows of `key` (its file is gone): the next `get` finds or renders it again."""
        self._documents.discard(key)

    def _folder(self, conn: Connection) -> tuple[Path, int]:
        shared = self._shared()
        instance = index_instance(conn) if shared is not None else None
        if shared is not None and instance is not None:
            shared.mkdir(parents=True, exist_ok=True)
            return shared, instance
        if self._private is None:
            held = tempfile.TemporaryDirectory(prefix="kernelwiki-documents-")
            weakref.finalize(self, held.cleanup)
            self._private = Path(held.name)
        return self._private, 0

    def _file(self, conn: Connection, key: Hashable, render: Callable[[str], str | Iterable[str]]) -> Rendered:
        folder, instance = self._folder(conn)
        path = folder / (hashlib.sha256(repr((instance, key)).encode()).hexdigest()[:40] + ".txt")
        found = _described(path)
        if found is not None:
            with contextlib.suppress(FileNotFoundError):
                os.utime(path)  # in use again: among the newest, which `_prune` keeps
            return found
        with _locked(folder / LOCK):
            found = _described(path)  # another process rendered it while this one waited
            if found is None:
                found = self._render(path, render)
                _prune(folder, keep=path)
        return found

    def _render(self, path: Path, render: Callable[[str], str | Iterable[str]]) -> Rendered:
        placeholder = f"http://kernelwiki-origin-{secrets.token_hex(8)}.invalid"  # no page contains it, by chance or design
        pieces = render(placeholder)
        digest, size = hashlib.sha256(), 0
        aside = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        try:
            with open(aside, "w+b") as out:
                out.write(b" " * HEADER_BYTES)
                for piece in [pieces] if isinstance(pieces, str) else pieces:
                    data = piece.encode()
                    digest.update(data)
                    size += len(data)
                    out.write(data)
                out.seek(HEADER_BYTES)
                count = _occurrences(blocks(out), placeholder.encode())
                header = {"size": size, "placeholder": placeholder, "count": count, "digest": digest.hexdigest()}
                out.seek(0)
                out.write(json.dumps(header).encode().ljust(HEADER_BYTES))
            os.replace(aside, path)
        finally:
            aside.unlink(missing_ok=True)
        self.renderings += 1
        return Rendered(path, size, placeholder.encode(), count, digest.hexdigest())


def _described(path: Path) -> Rendered | None:
    """The description of a rendered file, or None when there is none (yet, or any more)."""
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.read(HEADER_BYTES))
    except (FileNotFoundError, ValueError):
        return None
    return Rendered(path, header["size"], header["placeholder"].encode(), header["count"], header["digest"])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (made when missing): one rendering at a time over every process."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _prune(folder: Path, keep: Path) -> None:
    """Remove all but the newest KEEP_FILES documents (never `keep`), and files a dead rendering left aside.

    Called holding the folder's lock, so nothing is being written aside meanwhile. A process sending a removed
    file goes on reading it (an open file outlives its name)."""
    for aside in folder.glob(".*.txt.*"):
        aside.unlink(missing_ok=True)
    files = []
    for path in folder.glob("*.txt"):
        with contextlib.suppress(FileNotFoundError):
            files.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(files, reverse=True)[KEEP_FILES:]:
        if path != keep:
            path.unlink(missing_ok=True)


def blocks(handle: IO[bytes]) -> Iterator[bytes]:
    """The rest of a file, BLOCK_BYTES at a time."""
    while block := handle.read(BLOCK_BYTES):
        yield block


def substituted(chunks: Iterable[bytes], old: bytes, new: bytes) -> Iterator[bytes]:
    """`chunks` joined, with every `old` replaced by `new`, still in pieces (an `old` may straddle two chunks)."""
    for piece, _replaced in _replacing(chunks, old, new):
        yield piece


def _occurrences(chunks: Iterable[bytes], old: bytes) -> int:
    """How often `old` occurs in `chunks` joined (counted as `substituted` finds them)."""
    return sum(replaced for _piece, replaced in _replacing(chunks, old, old))


def _replacing(chunks: Iterable[bytes], old: bytes, new: bytes) -> Iterator[tuple[bytes, int]]:
    """`substituted`'s pieces, each with how many replacements it holds."""
    keep = len(old) - 1  # the last bytes of a chunk may begin an `old` that the next one ends
    pending = b""
    for chunk in chunks:
        data = pending + chunk
        out: list[bytes] = []
        pos = replaced = 0
        while (at := data.find(old, pos)) != -1:
            out += (data[pos:at], new)
            pos, replaced = at + len(old), replaced + 1
        cut = max(pos, len(data) - keep)
        out.append(data[pos:cut])
        pending = data[cut:]
        yield b"".join(out), replaced
    if pending:
        yield pending, 0


def matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for this header)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))
