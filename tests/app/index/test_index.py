"""Incremental, atomic reindexing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from app.index.filters import Filters
from app.store import Store


def test_unchanged_wiki_reparses_nothing(store, wiki_dir: Path) -> None:
    report = store.reindex(wiki_dir)
    assert (report.added, report.updated, report.removed, report.unchanged) == ([], [], [], 4)


def test_changed_file_is_reindexed_and_deleted_file_leaves(store, wiki_dir: Path) -> None:
    page = wiki_dir / "nvidia" / "tmem.md"
    page.write_text(page.read_text().replace("128 lanes", "128 lanes (quokka)"))
    (wiki_dir / "nvidia" / "mbarrier.md").unlink()
    report = store.reindex(wiki_dir)
    assert report.updated == ["hw-tmem"] and report.removed == ["hw-mbarrier"] and report.unchanged == 2
    assert [r.id for r in store.searcher.search("quokka", Filters()).results] == ["hw-tmem"]
    assert store.pages.get_page("hw-mbarrier") is None
    assert store.searcher.search("mbarrier", Filters(type="hardware")).results[0].id == "hw-tma"
    tma = store.pages.get_page("hw-tma")
    assert {link.id: link.resolved for link in tma.related} == {"hw-tmem": True, "hw-mbarrier": False}


def test_bad_page_is_reported_and_the_rest_is_indexed(store, wiki_dir: Path) -> None:
    (wiki_dir / "broken.md").write_text("---\nid: [x\n---\n")
    (wiki_dir / "dup.md").write_text("---\nid: hw-tma\ntitle: Again\n---\n")
    report = store.reindex(wiki_dir)
    text = [str(d) for d in report.diagnostics]
    assert any(t.startswith("broken.md:2: error: invalid YAML") for t in text)
    assert "dup.md:2: error: duplicate id 'hw-tma': also used by nvidia/tma.md; this page is left out" in text
    assert store.pages.get_page("hw-tma").title.startswith("Tensor Memory Accelerator")
    assert store.health.counts()["files_with_errors"] == 2


def test_duplicate_is_indexed_once_its_twin_is_gone(store, wiki_dir: Path) -> None:
    (wiki_dir / "dup.md").write_text("---\nid: hw-tma\ntitle: Again\n---\n")
    store.reindex(wiki_dir)
    (wiki_dir / "nvidia" / "tma.md").unlink()
    store.reindex(wiki_dir)
    assert store.pages.get_page("hw-tma").title == "Again"


def test_readers_never_see_a_half_built_index(db_url: str, wiki_dir: Path) -> None:
    for i in range(150):
        (wiki_dir / f"gen{i}.md").write_text(f"---\nid: gen-{i}\ntitle: Generated {i}\n---\n# S\nwarpgroup text {i}\n")
    writer = Store(db_url)
    writer.create_schema()
    writer.reindex(wiki_dir)
    reader = Store(db_url)
    seen: set[int] = set()
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                seen.add(reader.searcher.search("warpgroup", Filters(), limit=1).total)
            except BaseException as exc:  # noqa: BLE001 - any error fails the test
                errors.append(exc)
                return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for _ in range(3):
            for i in range(150):
                (wiki_dir / f"gen{i}.md").write_text(
                    f"---\nid: gen-{i}\ntitle: Generated {i}\n---\n# S\nwarpgroup text {i} {time.time()}\n"
                )
            writer.reindex(wiki_dir)
    finally:
        stop.set()
        thread.join()
        reader.engine.dispose()
        writer.engine.dispose()
    assert errors == []
    assert seen == {150}


def test_only_snippets_whose_content_changed_are_reported_as_changed(store, wiki_dir: Path) -> None:
    page = wiki_dir / "nvidia" / "tma.md"
    page.write_text(
        page.read_text().replace("the m16n8k16 shape", "the m16n8k16 shape (edited prose)")
        + "\n```cuda\n__device__ void other(int* p) { p[1] = 2; }\n```\n"
    )
    report = store.reindex(wiki_dir)
    assert report.updated == ["hw-tma"]
    assert report.changed_snippets == ["hw-tma:2"]


def test_bulk_insert_writes_every_row_and_text_with_nul_on_both_backends(store) -> None:  # type: ignore[no-untyped-def]
    """COPY on PostgreSQL, executemany on SQLite: the same rows come back, a NUL as U+FFFD on PostgreSQL (its text has none)."""
    from sqlalchemy import text

    from app.index.db import bulk_insert
    from app.index.models import DiagnosticRow

    rows = [{"path": f"bulk/{i}.md", "line": i, "severity": "info", "message": f"row {i}\ttab"} for i in range(1200)]
    rows[7]["message"] = "nul\x00here"
    with store.engine.begin() as conn:
        bulk_insert(conn, DiagnosticRow, rows)
    with store.engine.connect() as conn:
        back = dict(conn.execute(text("SELECT line, message FROM diagnostic WHERE path LIKE 'bulk/%'")).all())
    assert len(back) == 1200 and back[3] == "row 3\ttab"
    assert back[7] == ("nul\x00here" if store.engine.dialect.name == "sqlite" else "nul\ufffdhere")


def test_rows_written_as_copy_text_come_back_as_they_were_with_escapes_nulls_numbers_and_booleans(store) -> None:  # type: ignore[no-untyped-def]
    """The parse workers write PostgreSQL's COPY text themselves (app.index.db.copy_text): every character
    the format escapes, a literal backslash-N, NULL, floats and booleans survive the trip on both backends."""
    from sqlalchemy import text

    from app.index.db import copy_text, insert_rows
    from app.index.models import LinkRow, PerformanceClaimRow

    awkward = ["back\\slash and \\N and \\t", "tab\there", "lines\nand\r\nreturns", "ünïcödé € 😀", "", "\\"]
    links = [("src", target, "related", i % 2 == 0) for i, target in enumerate(awkward)]
    claims = [("src", i, None, "fp8", awkward[i], "tflops", [1.5, None, 1e-7, 2.0**60, -0.0, 3.0][i], None, None, None, "{}")
              for i in range(6)]  # fmt: skip
    columns = (
        "page_id",
        "position",
        "gpu",
        "dtype",
        "shape",
        "metric",
        "value",
        "utilization",
        "source_id",
        "source_locator",
        "data",
    )
    postgres = store.engine.dialect.name == "postgresql"
    with store.engine.begin() as conn:
        insert_rows(conn, LinkRow, ("source_id", "target_id", "kind", "resolved"), copy_text(links) if postgres else links)
        insert_rows(conn, PerformanceClaimRow, columns, copy_text(claims) if postgres else claims)
    with store.engine.connect() as conn:
        back = conn.execute(
            text("SELECT source_id, target_id, kind, resolved FROM link WHERE source_id = 'src' ORDER BY id")
        ).all()
        measured = conn.execute(
            text("SELECT position, gpu, shape, value FROM performance_claim WHERE page_id = 'src' ORDER BY position")
        ).all()
    assert [tuple(r) for r in back] == links
    assert [tuple(r) for r in measured] == [(i, None, awkward[i], claims[i][6]) for i in range(6)]


def test_a_large_reindex_into_postgresql_leaves_the_planner_statistics_of_what_it_wrote(postgres_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without statistics the planner took 10,000 indexed pages for 22 until autovacuum came by, and a listing by
    architecture probed the primary key once a page (253 ms instead of 14 at 10,000 pages)."""
    from sqlalchemy import text

    from app.index.build import ANALYZE_AFTER

    wiki = tmp_path / "many"
    wiki.mkdir()
    pages = ANALYZE_AFTER + 50
    for n in range(pages):
        (wiki / f"p{n}.md").write_text(f"---\nid: p{n}\ntitle: Page {n}\narchitectures: [sm90a]\n---\nText {n}.\n")
    store = Store(postgres_url)
    store.create_schema()
    assert len(store.reindex(wiki, full_text=False).added) == pages
    with store.engine.connect() as conn:
        counted = dict(
            conn.execute(text("SELECT relname, reltuples FROM pg_class WHERE relname IN ('page', 'architecture')")).all()
        )
    assert counted == {"page": pages, "architecture": pages}
    store.engine.dispose()


def test_a_reindex_into_postgresql_stores_page_text_compressed_with_lz4_where_the_server_has_it(
    postgres_url, wiki_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    """LZ4 costs the server a third less CPU than the default pglz on a full index; only that transaction's setting changes."""
    from sqlalchemy import text

    from app.index.build import LZ4_SQL

    store = Store(postgres_url)
    store.create_schema()
    (wiki_dir / "long.md").write_text("---\nid: long-page\ntitle: Long\n---\n" + "A sentence about warps and lanes. " * 400)
    try:
        with store.engine.connect() as conn:
            has_lz4 = bool(conn.execute(text(LZ4_SQL)).scalar())
            default = conn.execute(text("SHOW default_toast_compression")).scalar()
        store.reindex(wiki_dir)
        with store.engine.connect() as conn:
            method = conn.execute(text("SELECT pg_column_compression(body) FROM page WHERE id = 'long-page'")).scalar()
            after = conn.execute(text("SHOW default_toast_compression")).scalar()
        assert method == ("lz4" if has_lz4 else default)
        assert after == default  # SET LOCAL: the session's setting is back after the commit
        assert store.pages.get_page("long-page").title == "Long"
    finally:
        store.engine.dispose()
