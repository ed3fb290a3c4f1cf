"""The indexing thread: the first index, then watching the wiki folder (app/watch.py)."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import text

from app.settings import Settings
from app.store import Store
from app.watch import IndexKeeper, IndexStatus

PAGE = "---\nid: {id}\ntitle: {title}\ntype: technique\n---\nA page about {word}, written for the watcher.\n"


def test_a_page_written_between_the_first_index_and_the_arming_of_the_watcher_is_indexed(tmp_path: Path, wiki_dir: Path) -> None:
    """The watcher sees changes from its arming on; a page written after the first index's walk but before
    the arming is caught by the reindex on its first batch (it used to wait for the next change, while health
    said ok)."""
    (tmp_path / "evidence").mkdir()
    settings = Settings(wiki=wiki_dir, db=f"sqlite:///{tmp_path / 'index.db'}", evidence=tmp_path / "evidence", watch=True)
    store = Store(settings.db)
    store.create_schema()
    keeper = IndexKeeper(settings, store, IndexStatus())
    first_index = keeper.first_index

    def first_index_then_a_write() -> None:  # the write lands in the gap, deterministically
        first_index()
        (wiki_dir / "late.md").write_text(PAGE.format(id="late-page", title="Late", word="axolotl"))

    keeper.first_index = first_index_then_a_write  # type: ignore[method-assign]
    keeper.start()
    try:
        deadline = time.monotonic() + 20
        with store.engine.connect() as conn:
            while time.monotonic() < deadline:
                if conn.execute(text("SELECT count(*) FROM page WHERE id = 'late-page'")).scalar():
                    break
                conn.rollback()
                keeper.stop_event.wait(0.05)
            else:
                raise AssertionError("the page written before the watcher was armed was never indexed")
        assert keeper.thread.is_alive() and keeper.status.state == "ok"
    finally:
        keeper.stop(timeout=5)
        store.engine.dispose()
