"""The host's full-text index on disk: generation folders, the pointer to the current one, and when one may go.

One folder per database (`search_dir_for`) holds:

- `CURRENT`: which generation folder is current and the SQL index generation it
  answers for (JSON), replaced atomically (written aside, then renamed);
- `.lock`: held (flock, exclusive) by the one process that checks, builds,
  publishes or removes generations at a time;
- `g<generation>-<token>/`: one built generation, never changed once published
  (its `pages/`, `sections/`, `words/` tantivy indexes, `digest` and `state.json`); every
  process reading one holds a shared flock on its `in-use` file, and a folder
  is removed only when an exclusive one can be had (nobody reads it).

A new generation starts as hard links to the previous one's files (tantivy
never rewrites a file: a commit adds segment and delete files and replaces
`meta.json` by rename), so an edit of a few pages writes a few pages.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sqlalchemy.engine import make_url

POINTER = "CURRENT"
LOCK = ".lock"
IN_USE = "in-use"
STATE = "state.json"
"""A generation's page table (content hash and number of each page): written last, so its presence means complete."""
DIGEST = "digest"
"""A generation's digest of its pages (`app.search.sync.pages_digest`): what a process opening it compares with the SQL rows."""
INDEXES = ("pages", "sections", "words")


@dataclass(frozen=True)
class Pointer:
    """The current generation folder (a name inside the host folder) and the SQL index generation it answers for."""

    folder: str
    generation: int


def search_dir_for(url: str, data: Path = Path(".kernelwiki")) -> Path | None:
    """Where a database's full-text index lives by default: beside an SQLite file, else under `data`/search.

    None for an in-memory SQLite database (the engine then keeps a private temporary folder).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database or ""
        if db.startswith("file:"):  # the read-only form of app.main.read_only_url
            db = db[len("file:") :].split("?", 1)[0]
        if not db or db == ":memory:":
            return None
        path = Path(db)
        return path.with_name(path.name + ".search")
    return data / "search" / f"{parsed.host or 'local'}-{parsed.port or 'default'}-{parsed.database or 'default'}"


class HostFolder:
    """The generations of one database's full-text index on this host (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def pointer(self) -> Pointer | None:
        """The current generation, or None when none was published (or the pointer is unreadable)."""
        try:
            data = json.loads((self.root / POINTER).read_text())
            return Pointer(str(data["folder"]), int(data["generation"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The host-wide lock of checking, building, publishing and removing generations."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def publish(self, pointer: Pointer) -> None:
        """Make `pointer` current: written aside, synced, then renamed over the old pointer (atomic)."""
        aside = self.root / f".{POINTER}.{secrets.token_hex(4)}"
        with open(aside, "w") as handle:
            json.dump({"folder": pointer.folder, "generation": pointer.generation}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(aside, self.root / POINTER)

    def new_folder(self, generation: int, base: str | None) -> Path:
        """An empty generation folder, or one whose indexes start as hard links to those of `base`."""
        path = self.root / f"g{generation:09d}-{secrets.token_hex(4)}"
        path.mkdir(parents=True)
        (path / IN_USE).touch()
        for name in INDEXES:
            (path / name).mkdir()
            if base is None or name == "words":  # the word list is rebuilt whole each generation
                continue
            for item in (self.root / base / name).iterdir():
                if item.name.startswith(".tantivy-") and item.name.endswith(".lock"):
                    continue
                try:
                    os.link(item, path / name / item.name)
                except OSError:  # a file system without hard links
                    shutil.copy2(item, path / name / item.name)
        return path

    def state(self, folder: str) -> dict[str, Any] | None:
        """A generation's `state.json`, or None when it is missing or unreadable."""
        try:
            data: dict[str, Any] = json.loads((self.root / folder / STATE).read_text())
            return data
        except (OSError, ValueError):
            return None

    def digest(self, folder: str) -> str | None:
        """A generation's digest of its pages, or None when it is missing (a folder of an older version)."""
        try:
            return (self.root / folder / DIGEST).read_text().strip() or None
        except OSError:
            return None

    def hold(self, folder: str) -> IO[str] | None:
        """A shared lock on a complete generation folder (kept while the handle is open), or None if it was removed."""
        try:
            handle = open(self.root / folder / IN_USE)  # noqa: SIM115  # kept open while the generation is read
        except FileNotFoundError:
            return None
        fcntl.flock(handle, fcntl.LOCK_SH)  # waits while a remover holds it, then finds the folder gone
        if not (self.root / folder / STATE).exists():
            handle.close()
            return None
        return handle

    def clean(self, keep: str) -> list[str]:
        """Remove the generation folders other than `keep` that no process reads (call it holding `locked`)."""
        removed = []
        for path in sorted(self.root.glob("g*-*")):
            if path.name == keep or not path.is_dir():
                continue
            try:
                handle = open(path / IN_USE)  # noqa: SIM115
            except FileNotFoundError:
                shutil.rmtree(path, ignore_errors=True)  # a build that died before its first file
                removed.append(path.name)
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a process still reads it: removed by a later publish
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path.name)
        for aside in self.root.glob(f".{POINTER}.*"):  # pointers written aside by a process that died before renaming
            aside.unlink(missing_ok=True)
        return removed
