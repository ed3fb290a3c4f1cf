"""Keeping the index in line with the wiki while the service runs: the first index in the background, then watching.

`IndexKeeper` runs in one thread, started by the app's lifespan (or, with
`serve --workers N`, by the supervising process): it indexes the wiki and loads
the committed evidence while the server already answers, reporting its
progress through `IndexStatus` (which `/api/health` shows), and then, with
`watch` on, reindexes whenever a file under the wiki folder is added, changed
or deleted (watchfiles). A reindex is incremental and one transaction, so
readers see the old index or the new one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import broken_index_line, damaged_line
from app.settings import Settings
from app.store import Store

log = logging.getLogger("kernelwiki")
DEBOUNCE_MS = 150
"""Changes that arrive together (an editor's save, a git checkout) are reindexed once."""
WIKI_CHECK_S = 0.5
"""How often a watching service checks that the wiki folder itself is still there."""


@dataclass
class IndexStatus:
    """Where the service's index stands: `starting` → `indexing` → `ok`, or `degraded` with the one-line reason."""

    state: str = "starting"
    phase: str = ""  # what the first index is doing
    files_total: int | None = None  # Markdown files found under the wiki folder
    started_at: float = field(default_factory=time.time)
    indexed_at: float | None = None  # when the last reindex finished
    problem: str | None = None  # one line naming the file and the fix, when degraded
    stale: str | None = None  # why the index no longer follows the wiki (its folder is gone); the last index is served
    reindexes: int = 0  # reindexes done by watching
    ready: threading.Event = field(default_factory=threading.Event)  # set once the first index is done (or failed)
    sink: Path | None = None  # where a supervising process publishes this status for its workers

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        if self.state in ("ok", "degraded"):
            self.ready.set()
        if self.sink is not None:
            _write_atomically(self.sink, json.dumps(self.as_dict()))

    def degrade(self, line: str) -> None:
        """Mark the index as unusable, once per distinct reason (logged)."""
        if self.problem != line:
            log.error("%s", line)
        self.update(state="degraded", problem=line)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.state}
        if self.state in ("starting", "indexing"):
            out["indexing"] = {
                "phase": self.phase,
                "files": self.files_total,
                "elapsed_s": round(time.time() - self.started_at, 1),
            }
        if self.problem:
            out["problem"] = self.problem
        elif self.stale:  # the index still answers, from before the wiki folder went missing: degraded, not broken
            out.update(status="degraded", problem=self.stale, stale=True)
        if self.indexed_at is not None:
            out["indexed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.indexed_at))
        return out


def status_file(settings: Settings) -> Path:
    """Where `serve --workers N` publishes the index status for its workers: beside a SQLite index, else in `.kernelwiki/`."""
    url = settings.db
    if url.startswith("sqlite") and "///" in url and url.split("///", 1)[1] not in ("", ":memory:"):
        return Path(url.split("///", 1)[1].removeprefix("file:").split("?", 1)[0] + ".status.json")
    return Path(".kernelwiki/serve-status.json")


def read_published(path: Path) -> dict[str, Any] | None:
    """The status a supervising process published (`serve --workers N`), or None when there is none yet."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_atomically(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # a status file is a convenience, never a reason to stop
        log.warning("cannot publish the index status to %s: %s", path, exc)


def count_pages(root: Path) -> int:
    """Markdown files under the wiki folder (hidden folders skipped), for progress reports."""
    total = 0
    for _dir, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(1 for f in files if f.endswith(".md") and not f.startswith("."))
    return total


class IndexKeeper:
    """The one thread that writes the index while the service runs."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        status: IndexStatus,
        on_changed_snippets: Callable[[list[str]], None] | None = None,
        on_indexed: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.status = status
        self.on_changed_snippets = on_changed_snippets
        self.on_indexed = on_indexed  # after the first index and each reindex that changed pages (never fatal)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, name="kernelwiki-index", daemon=True)

    def start(self) -> IndexKeeper:
        self.thread.start()
        return self

    def stop(self, timeout: float = 1.0) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def run(self) -> None:
        try:
            if self.settings.index_on_start:
                self.first_index()
            self._check()
            if self.status.state != "degraded":
                self.status.update(state="ok", phase="", indexed_at=time.time())
            if self.settings.watch and not self.stop_event.is_set():
                self.watch()
        except Exception as exc:  # noqa: BLE001 - the thread must report, never die silently
            line = broken_index_line(self.settings.db, exc)
            if line is None:
                log.exception("indexing failed")
                line = f"{self.settings.wiki}: error: indexing failed: {type(exc).__name__}: {exc}"
            self.status.degrade(line)

    def first_index(self) -> None:
        wiki = self.settings.wiki
        self.status.update(state="indexing", phase="finding pages", files_total=count_pages(wiki) if wiki.is_dir() else 0)
        self.status.update(phase=f"indexing {self.status.files_total} files")
        self.reindex(first=True)
        self.status.update(phase="loading committed evidence")
        loaded = self.store.evidence.load_dir(self.settings.evidence)
        for e in loaded.errors:
            log.warning("%s", e)
        if loaded.inserted:
            log.info("evidence: %d new records from %s", loaded.inserted, self.settings.evidence)

    def wiki_missing(self) -> bool:
        """Whether the wiki folder is gone; then the index is kept as it was and health says so (degraded)."""
        wiki = self.settings.wiki
        if wiki.is_dir():
            if self.status.stale:
                log.warning("%s: the wiki folder is back; reindexing", wiki)
                self.status.update(stale=None)
            return False
        line = f"{wiki.resolve()}: error: the wiki folder is missing (moved or deleted?); serving the last index until it is back"
        if self.status.stale != line:
            log.error("%s", line)
            self.status.update(stale=line)
        return True

    def reindex(self, first: bool = False) -> None:
        if self.wiki_missing():
            return
        try:
            report = self.store.reindex(self.settings.wiki)
        except FileNotFoundError:
            if self.wiki_missing():  # it went away during the walk: nothing was written
                return
            raise
        for d in report.diagnostics:
            log.warning("%s", d)
        if self.on_changed_snippets is not None and report.changed_snippets:
            self.on_changed_snippets(report.changed_snippets)
        changed = len(report.added) + len(report.updated) + len(report.removed)
        if self.on_indexed is not None and (first or changed):
            try:
                self.on_indexed()
            except Exception:  # noqa: BLE001 - what follows an index is an optimisation: the index stands
                log.warning("after indexing: %s failed", getattr(self.on_indexed, "__name__", "a step"), exc_info=True)
        if changed:
            log.info(
                "reindexed %s: %d added, %d updated, %d removed in %.2fs",
                self.settings.wiki,
                len(report.added),
                len(report.updated),
                len(report.removed),
                report.seconds,
            )

    def _check(self) -> None:
        """SQLite's own quick integrity check once the index is built: a damaged file is reported, not served as 'ok'."""
        if not self.store.url.startswith("sqlite"):
            return
        with self.store.engine.connect() as conn:
            problems = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            self.status.degrade(damaged_line(self.settings.db, f"integrity check: {problems[0]}"))

    def watch(self) -> None:
        """Reindex after every batch of changes under the wiki folder, until stopped."""
        from watchfiles import watch

        wiki = self.settings.wiki
        first = True
        while not self.stop_event.is_set():
            while not self.stop_event.is_set() and not wiki.is_dir():
                self.stop_event.wait(WIKI_CHECK_S)  # a wiki folder that appears (or comes back) is watched from then on
            if self.stop_event.is_set():
                return
            # Catch up with what changed since the last walk (the first index's, or the folder came back), but only
            # once the watcher is armed (its first batch, at most WIKI_CHECK_S later): a file written between the
            # walk and the arming was otherwise never indexed while health said ok.
            catch_up, first = first or bool(self.status.stale), False
            log.info("watching %s for changes", wiki)
            for changes in watch(
                wiki,
                debounce=DEBOUNCE_MS,
                step=25,
                stop_event=self.stop_event,
                rust_timeout=int(WIKI_CHECK_S * 1000),
                yield_on_timeout=True,  # an empty batch every WIKI_CHECK_S: time to see the folder itself go
                raise_interrupt=False,
            ):
                if not wiki.is_dir():
                    self.wiki_missing()
                    break  # watch it again once it is back (a folder put back is another inode)
                if changes or catch_up:
                    catch_up = False
                    self._reindex_now()

    def _reindex_now(self) -> None:
        try:
            self.reindex()
            self.status.update(indexed_at=time.time(), reindexes=self.status.reindexes + 1)
        except Exception as exc:  # noqa: BLE001 - a bad moment (a half-written file) must not end watching
            line = broken_index_line(self.settings.db, exc)
            if line is not None:
                self.status.degrade(line)
            else:
                log.exception("reindex after a change failed")
