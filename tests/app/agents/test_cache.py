"""The rendered agent documents' files (app/agents/cache.py): shared by the processes of one database, never another's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.agents.cache import KEEP_FILES, RenderedDocuments, _occurrences, substituted
from app.index.db import create_schema, make_engine

ORIGIN = "http://mirror.example:8443"


def _rendering(text: str, calls: list[str]):  # type: ignore[no-untyped-def]
    """A render function that writes `text` with the origin at both ends, and notes each call."""

    def render(origin: str) -> list[str]:
        calls.append(text)
        return [f"{origin}/start ", text, f" {origin}/end\n"]

    return render


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'index.db'}")
    create_schema(engine)
    yield engine
    engine.dispose()


def test_substitution_replaces_every_occurrence_however_the_blocks_split_it() -> None:
    old, new = b"http://placeholder.invalid", b"https://h:1"
    text = b"x" + old + b"/a " + old + old + b" tail " + old[:-1] + b" " + old
    expected = text.replace(old, new)
    for cut in range(len(text) + 1):  # two blocks, split at every byte
        assert b"".join(substituted([text[:cut], text[cut:]], old, new)) == expected, cut
    assert b"".join(substituted([bytes([b]) for b in text], old, new)) == expected  # one byte a block
    assert _occurrences([bytes([b]) for b in text], old) == text.count(old) == 4


def test_a_second_process_on_the_database_sends_the_first_ones_file_without_rendering(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "documents"
    calls: list[str] = []
    first, second = RenderedDocuments(lambda: folder), RenderedDocuments(lambda: folder)
    with engine.connect() as conn:
        made = first.get(conn, ("llms.txt", 1), _rendering("body", calls))
        read = second.get(conn, ("llms.txt", 1), _rendering("other body", calls))
    assert calls == ["body"] and (first.renderings, second.renderings) == (1, 0)
    assert read == made and read.text(ORIGIN) == f"{ORIGIN}/start body {ORIGIN}/end\n"
    assert read.length(ORIGIN) == len(read.text(ORIGIN).encode())
    assert [p.name for p in folder.iterdir() if p.suffix == ".txt"] == [made.path.name]  # nothing left aside


def test_a_database_made_anew_at_the_same_place_never_gets_the_old_ones_documents(tmp_path: Path) -> None:
    folder, db = tmp_path / "documents", tmp_path / "index.db"
    texts = []
    for text in ("old database", "new database"):
        db.unlink(missing_ok=True)
        engine = make_engine(f"sqlite:///{db}")
        create_schema(engine)  # generations count from 1 again: the same key
        with engine.connect() as conn:
            texts.append(RenderedDocuments(lambda: folder).get(conn, ("llms.txt", 1), _rendering(text, [])).text(ORIGIN))
        engine.dispose()
    assert "old database" in texts[0] and "new database" in texts[1]


def test_only_the_newest_files_stay_and_a_removed_one_is_rendered_again(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "documents"
    documents, calls = RenderedDocuments(lambda: folder, size=KEEP_FILES + 4), []
    with engine.connect() as conn:
        kept = [documents.get(conn, ("llms.txt", n), _rendering(f"version {n}", calls)) for n in range(KEEP_FILES + 2)]
        assert sorted(folder.glob("*.txt")) == sorted(r.path for r in kept[2:])
        with pytest.raises(FileNotFoundError):
            kept[0].open()  # this process still knows it, but its file went as old
        documents.forget(("llms.txt", 0))
        again = documents.get(conn, ("llms.txt", 0), _rendering("version 0", calls))
    assert again.text(ORIGIN).count("version 0") == 1 and calls.count("version 0") == 2


def test_an_index_without_an_instance_number_keeps_its_documents_to_the_process(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An index from before instance numbers, opened read-only by a worker (no writer added one yet)."""
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(text("DELETE FROM index_state WHERE key = 'instance'"))
    folder = tmp_path / "documents"
    documents = RenderedDocuments(lambda: folder)  # its own folder goes with it
    with engine.connect() as conn:
        rendered = documents.get(conn, ("llms.txt", 1), _rendering("body", []))
    assert not folder.exists() and rendered.path.parent != folder and "body" in rendered.text(ORIGIN)


def test_the_indexer_renders_llms_txt_of_each_generation_it_makes_so_no_worker_has_to(settings: Any, tmp_path: Path) -> None:
    """`serve`'s index keeper renders /llms.txt after its first index and after a reindex that changed pages."""
    from app.agents.cache import documents_dir
    from app.agents.documents import llms_txt
    from app.agents.routes import llms_txt_key
    from app.main import keeper_for, open_store
    from app.watch import IndexStatus

    settings = settings.model_copy(update={"search_dir": tmp_path / "search"})
    store = open_store(settings)
    try:
        keeper_for(settings, store, IndexStatus()).run()  # the first index (no watching: it returns)
        worker = RenderedDocuments(lambda: documents_dir(store.search_engine.directory))  # a worker's, say
        with store.engine.connect() as conn:
            key = llms_txt_key(conn)
            found = worker.get(conn, key, lambda origin: llms_txt(store.pages, origin, key[2]))
            assert worker.renderings == 0 and "/pages/hw-tma.md" in found.text("http://w")
            (settings.wiki / "new-page.md").write_text("---\nid: new-page\ntitle: A new page\ntype: technique\n---\nText.\n")
        keeper_for(settings, store, IndexStatus()).reindex()
        with store.engine.connect() as conn:
            key = llms_txt_key(conn)
            found = worker.get(conn, key, lambda origin: llms_txt(store.pages, origin, key[2]))
        assert worker.renderings == 0 and "/pages/new-page.md" in found.text("http://w")
    finally:
        store.engine.dispose()
