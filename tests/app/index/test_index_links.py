"""Files and folders linked into the wiki from outside are never indexed, and lint names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from app.cli.main import cli

SECRET = "---\nid: secret\ntitle: Secret\ntype: concept\n---\n# Secret\n\nclassified okapi words\n"


def test_links_leaving_the_wiki_are_skipped_and_named(store, wiki_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    (outside / "nested.md").write_text(SECRET.replace("id: secret", "id: nested"))
    (wiki_dir / "secret.md").symlink_to(outside / "secret.md")
    (wiki_dir / "elsewhere").symlink_to(outside, target_is_directory=True)
    (wiki_dir / "inner").mkdir()
    (wiki_dir / "inner" / "same.md").symlink_to(wiki_dir / "ptx.md")  # a link that stays inside is fine

    report = store.reindex(wiki_dir)
    warnings = {d.path: d.message for d in report.diagnostics if d.severity == "warning"}
    assert "links outside the wiki folder" in warnings["secret.md"] and str(outside / "secret.md") in warnings["secret.md"]
    assert "folder links outside" in warnings["elsewhere"]
    assert store.searcher.search("okapi", __import__("app.index.filters", fromlist=["Filters"]).Filters()).total == 0
    assert store.pages.get_page("secret") is None and store.pages.get_page("nested") is None

    result = CliRunner().invoke(cli, ["lint", "--wiki", str(wiki_dir)])
    assert "secret.md:1: warning: this file links outside the wiki folder" in result.output
    assert "elsewhere:1: warning: this folder links outside the wiki folder" in result.output


def test_a_page_swapped_for_an_outside_link_after_the_walk_is_never_read(
    store, wiki_dir: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The race of `serve --watch`: the walk sees a regular page, then the file becomes a link to a file outside."""
    import os

    import app.index.build as index

    outside = tmp_path / "outside.md"
    outside.write_text(SECRET.replace("classified okapi words", "OUTSIDE-WIKI-CONTENT password=hunter2"))
    race = wiki_dir / "nvidia" / "race.md"
    race.write_text(SECRET.replace("id: secret", "id: race-page").replace("classified okapi", "inside words"))
    walk = index._fast_walk

    def walk_then_swap(root: Path, *args: Any) -> Any:
        found = walk(root, *args)
        swapped = race.with_name("race.tmp")
        swapped.symlink_to(outside)
        os.replace(swapped, race)  # the atomic rename an attacker uses
        return found

    monkeypatch.setattr(index, "_fast_walk", walk_then_swap)
    report = store.reindex(wiki_dir)
    assert store.pages.get_page("secret") is None and store.pages.get_page("race-page") is None
    assert "race-page" not in report.added and "secret" not in report.added
    assert any(d.path == "nvidia/race.md" and "links outside the wiki folder" in d.message for d in report.diagnostics)
    from app.index.filters import Filters

    assert store.searcher.search("hunter2", Filters()).total == 0


def test_read_page_opens_only_regular_files_reached_without_leaving_the_wiki(wiki_dir: Path, tmp_path: Path) -> None:
    import os

    import pytest

    from app.index.pagefile import PageRefused, read_page

    (tmp_path / "outside.md").write_text(SECRET)
    (wiki_dir / "out.md").symlink_to(tmp_path / "outside.md")
    (wiki_dir / "in.md").symlink_to(wiki_dir / "ptx.md")
    (wiki_dir / "outdir").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(wiki_dir / "fifo.md")
    (wiki_dir / "folder.md").mkdir()
    assert read_page(wiki_dir, "in.md") == (wiki_dir / "ptx.md").read_bytes()  # a link that stays inside
    assert read_page(wiki_dir, "nvidia/tma.md") == (wiki_dir / "nvidia" / "tma.md").read_bytes()
    for rel, why in [
        ("out.md", "links outside the wiki folder"),
        ("outdir/outside.md", "links outside the wiki folder"),
        ("fifo.md", "not a regular file"),
        ("folder.md", "not a regular file"),
        ("../outside.md", "not a plain relative path"),
    ]:
        with pytest.raises(PageRefused, match=why):
            read_page(wiki_dir, rel)


def test_reading_many_pages_leaves_no_memory_mapping_per_page_and_still_refuses_oversized_files(
    wiki_dir: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A process may hold 65,530 memory mappings: a full index of 100,000 pages once held one per page read and failed."""
    import pytest

    from app.index import pagefile

    folder = wiki_dir / "many"
    folder.mkdir()
    for i in range(400):
        (folder / f"p{i}.md").write_text(f"---\nid: p{i}\n---\n" + "text " * 400)

    def mappings() -> int:
        return len(Path("/proc/self/maps").read_text().splitlines())

    before = mappings()
    kept = [pagefile.read_page(wiki_dir, f"many/p{i}.md") for i in range(400)]  # held, as a reindex holds them
    assert kept[7] == (folder / "p7.md").read_bytes()
    assert mappings() - before < 100
    monkeypatch.setattr(pagefile, "PAGE_MAX_BYTES", 1000)
    with pytest.raises(pagefile.PageRefused, match="larger than 1000 bytes"):
        pagefile.read_page(wiki_dir, "many/p1.md")
