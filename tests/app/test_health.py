"""app/health.py: what the index holds, its dialect, and its first errors as `path:line: error: message`."""

from __future__ import annotations

from pathlib import Path

from app.health import ERRORS_SHOWN


def test_the_counts_and_errors_of_the_index(store, wiki_dir: Path) -> None:  # type: ignore[no-untyped-def]
    counts = store.health.counts()
    assert counts["status"] == "ok" and counts["database"] == store.engine.dialect.name
    assert (counts["pages"], counts["files"], counts["files_with_errors"], counts["errors"]) == (4, 4, 0, [])
    assert counts["snippets"] > 0 and counts["evidence_records"] == 0
    (wiki_dir / "broken.md").write_text("---\nid: [x\n---\n")
    store.reindex(wiki_dir)
    with store.engine.connect() as conn:  # the request's connection, when it has one
        counts = store.health.counts(conn)
    assert (counts["pages"], counts["files"], counts["files_with_errors"]) == (4, 5, 1)
    assert [e.split(": error: ")[0] for e in counts["errors"]] == ["broken.md:2"]


def test_at_most_the_first_errors_are_named(store, wiki_dir: Path) -> None:  # type: ignore[no-untyped-def]
    for i in range(ERRORS_SHOWN + 5):
        (wiki_dir / f"broken{i:03}.md").write_text("---\nid: [x\n---\n")
    store.reindex(wiki_dir)
    counts = store.health.counts()
    assert counts["files_with_errors"] == ERRORS_SHOWN + 5
    assert len(counts["errors"]) == ERRORS_SHOWN and counts["errors"][0].startswith("broken000.md:2: error:")
