"""The host's on-disk full-text index: where it lives, one build shared by every process, generations let go."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.index.filters import Filters
from app.search import SearchEngine, search_dir_for, sync
from app.search.sync import pages_digest
from app.store import Store

KWREPO = Path(__file__).resolve().parents[2] / "fixtures" / "kwrepo"


def test_the_folder_lies_beside_an_sqlite_file_and_per_database_under_the_data_folder_for_postgresql() -> None:
    assert search_dir_for("sqlite:////srv/kw/index.db") == Path("/srv/kw/index.db.search")
    assert search_dir_for("sqlite:///file:/srv/kw/index.db?mode=ro&uri=true") == Path("/srv/kw/index.db.search")
    assert search_dir_for("sqlite://") is None and search_dir_for("sqlite:///:memory:") is None
    assert search_dir_for("postgresql+psycopg://kw:secret@db.internal:5433/wiki") == Path(
        ".kernelwiki/search/db.internal-5433-wiki"
    )


def _generations(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("g*"))


def test_processes_share_one_build_and_a_generation_goes_once_nobody_reads_it(
    db_url: str, wiki_dir: Path, tmp_path: Path
) -> None:
    """Two Stores with their own engines on one folder stand for two serving processes."""
    folder = tmp_path / "search"
    writer = Store(db_url, search_engine=SearchEngine(directory=folder))
    reader = Store(db_url, search_engine=SearchEngine(directory=folder))
    try:
        writer.create_schema()
        writer.reindex(wiki_dir)
        (first,) = _generations(folder)
        assert reader.searcher.search("TMEM", Filters()).results[0].id == "hw-tmem"
        assert reader.search_engine._folder == first and _generations(folder) == [first]  # opened, not built again

        def edit(word: str) -> None:
            page = wiki_dir / "ptx.md"
            page.write_text(page.read_text() + f"\n{word}\n")
            writer.reindex(wiki_dir)

        edit("wombat")
        second = writer.search_engine._folder
        assert second != first and _generations(folder) == sorted([first, second])  # the reader still holds the first
        assert [r.id for r in reader.searcher.search("wombat", Filters()).results] == [
            "doc-ptx-isa"
        ]  # refresh_s=0: every search asks
        assert reader.search_engine._folder == second
        edit("numbat")
        third = writer.search_engine._folder
        assert _generations(folder) == sorted([second, third])  # the first went once nobody read it; the reader holds the second
        assert [r.id for r in reader.searcher.search("numbat", Filters()).results] == ["doc-ptx-isa"]
    finally:
        reader.engine.dispose()
        writer.engine.dispose()


@contextmanager
def _serving(db_url: str, folder: Path, wiki: Path | None = None) -> Iterator[Store]:
    """A Store on the host folder `folder` (with `wiki`: the schema made and the wiki indexed first), disposed after."""
    store = Store(db_url, search_engine=SearchEngine(directory=folder))
    try:
        if wiki is not None:
            store.create_schema()
            store.reindex(wiki)
        yield store
    finally:
        store.engine.dispose()


def test_a_process_starting_on_a_folder_that_does_not_hold_the_databases_rows_rebuilds_it(
    db_url: str, wiki_dir: Path, tmp_path: Path
) -> None:
    """A database made anew starts its generations again: a fresh process checks the pages, not only the number."""
    folder = tmp_path / "search"
    with _serving(db_url, folder, wiki_dir) as first:
        published = first.search_engine._folder
        state, digest = folder / str(published) / "state.json", folder / str(published) / "digest"
        # As if the folder were of another database: its page table and digest name another page.
        state.write_text(state.read_text().replace("hw-tmem", "hw-gone"))
        digest.write_text(digest.read_text()[:-1] + ("0" if digest.read_text()[-1] != "0" else "1"))
        with _serving(db_url, folder) as fresh:
            assert fresh.searcher.search("TMEM", Filters()).results[0].id == "hw-tmem"
            assert fresh.search_engine._folder != published


def test_a_process_opening_a_current_folder_checks_its_digest_and_reads_no_page_table(
    db_url: str, wiki_dir: Path, tmp_path: Path
) -> None:
    """A serving process compares the folder's digest with the SQL rows; every page's hash is read only to build."""
    folder = tmp_path / "search"
    with _serving(db_url, folder, wiki_dir) as first:
        published = first.search_engine._folder
        (folder / str(published) / "state.json").write_text("{}")  # read, it would have no table: a rebuild
        with _serving(db_url, folder) as fresh:
            assert fresh.searcher.search("TMEM", Filters()).results[0].id == "hw-tmem"
            assert fresh.search_engine._folder == published


def test_a_folder_without_a_digest_is_checked_by_its_page_table_and_given_one(
    db_url: str, wiki_dir: Path, tmp_path: Path
) -> None:
    """A generation written by a version without digests is still opened (not rebuilt), and checked cheaply next time."""
    folder = tmp_path / "search"
    with _serving(db_url, folder, wiki_dir) as first:
        published = first.search_engine._folder
        digest = folder / str(published) / "digest"
        written = digest.read_text()
        digest.unlink()
        with _serving(db_url, folder) as fresh:
            assert fresh.searcher.search("TMEM", Filters()).results[0].id == "hw-tmem"
            assert fresh.search_engine._folder == published and digest.read_text() == written


def test_the_pages_digest_is_the_one_the_build_wrote_moves_with_a_page_and_leaves_the_connection_as_it_was(
    db_url: str, wiki_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "search"
    with _serving(db_url, folder, wiki_dir) as store:
        written = (folder / str(store.search_engine._folder) / "digest").read_text()
        with store.engine.connect() as conn:
            assert pages_digest(conn) == written and written.startswith("4:")
            assert dict(conn.get_execution_options()) == {}  # no streaming option left on the caller's connection
        page = wiki_dir / "ptx.md"
        page.write_text(page.read_text() + "\nwombat\n")
        store.reindex(wiki_dir)
        with store.engine.connect() as conn:
            assert pages_digest(conn) != written
            assert pages_digest(conn) == (folder / str(store.search_engine._folder) / "digest").read_text()


def test_a_reparse_that_no_page_file_caused_reaches_the_full_text_index(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to data/aliases.yaml reparses every page with its content hash as it was; the full-text index kept the
    generation of the old aliases (its digest and page table name only ids, hashes and paths). So does a new format of
    its documents: a process of the new version builds the host's index anew instead of opening the old one."""
    root = Path(shutil.copytree(KWREPO, tmp_path / "repo"))
    folder = tmp_path / "search"
    with _serving(db_url, folder, root) as store:
        assert store.searcher.search("async tile mover", Filters()).results[0].id != "hw-bulk-copy"
        aliases_file = root / "data" / "aliases.yaml"
        aliases_file.write_text(aliases_file.read_text() + 'tma-extra:\n  - "async tile mover"\n  - TMA\n')
        assert len(store.reindex(root).updated) == 14
        assert store.searcher.search("async tile mover", Filters()).results[0].id == "hw-bulk-copy"  # the exact alias
        published = store.search_engine._folder
    monkeypatch.setattr(sync, "FORMAT", sync.FORMAT + 1)
    with _serving(db_url, folder) as fresh:
        assert fresh.searcher.search("async tile mover", Filters()).results[0].id == "hw-bulk-copy"
        assert fresh.search_engine._folder != published


def test_the_process_that_indexes_builds_its_generation_and_a_process_syncing_meanwhile_waits_and_opens_it(
    db_url: str, wiki_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --workers N`: a worker whose first search falls between `serve`'s SQL commit and its sync must not
    build the generation itself (it would hold the build's memory for good); it waits for the host lock."""
    folder = tmp_path / "search"
    indexer = Store(db_url, search_engine=SearchEngine(directory=folder))
    reader = Store(db_url, search_engine=SearchEngine(directory=folder))
    builders: list[object] = []
    build = sync.SyncedIndex._build
    monkeypatch.setattr(sync.SyncedIndex, "_build", lambda self, *a, **k: (builders.append(self), build(self, *a, **k))[1])
    asked = threading.Event()  # the reader asked for the host lock
    locked = sync.HostFolder.locked

    def noting(self: sync.HostFolder) -> Any:
        if threading.current_thread().name == "reader-sync":
            asked.set()
        return locked(self)

    monkeypatch.setattr(sync.HostFolder, "locked", noting)

    reader_tid: list[int] = []

    def reader_sync() -> None:
        reader_tid.append(threading.get_native_id())
        with reader.engine.connect() as conn:
            reader.search_engine.sync(conn)

    def blocked_in_flock() -> bool:
        """Whether the reader's thread waits in flock(2) now (/proc: its syscall number, x86_64 73, aarch64 32)."""
        try:
            call = (Path("/proc/self/task") / str(reader_tid[0]) / "syscall").read_text().split()[0]
        except (OSError, IndexError):
            return False
        return call == {"x86_64": "73", "aarch64": "32"}.get(os.uname().machine)

    try:
        indexer.create_schema()
        with indexer.search_engine.writing():  # what Store.reindex does, with the reader's first sync in between
            indexer.reindex(wiki_dir, full_text=False)  # the SQL commit
            waiting = threading.Thread(target=reader_sync, name="reader-sync")
            waiting.start()
            assert asked.wait(30)
            # Until the reader either built the generation itself (the race this guards against) or waits for the lock.
            deadline = time.monotonic() + 60
            while waiting.is_alive() and not blocked_in_flock() and time.monotonic() < deadline:
                waiting.join(0.01)
            with indexer.engine.connect() as conn:
                indexer.search_engine.sync(conn)
        waiting.join(30)
        assert not waiting.is_alive()
        assert builders == [indexer.search_engine]  # the reader built nothing
        assert reader.search_engine._folder == indexer.search_engine._folder
        assert reader.searcher.search("TMEM", Filters()).results[0].id == "hw-tmem"
    finally:
        reader.engine.dispose()
        indexer.engine.dispose()
