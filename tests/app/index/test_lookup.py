"""app/index/lookup.py: a page by id, alias or title; by its file; and the Markdown bodies of many pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.index.lookup import RepositoryFiles, page_by_path, page_sources, resolve


def test_a_name_resolves_by_id_alias_or_title_ignoring_case_and_spaces(shared_store) -> None:  # type: ignore[no-untyped-def]
    store = shared_store  # reads only: one index per backend for the module
    with store.engine.connect() as conn:
        assert resolve(conn, "hw-tma") == "hw-tma"
        assert resolve(conn, " HW-TMA ") == "hw-tma"
        assert resolve(conn, "utmaldg") == "hw-tma"  # an alias
        assert resolve(conn, "Tensor Memory Accelerator (TMA)".lower()) == "hw-tma"  # the title
        assert resolve(conn, "tensor memory") == "hw-tmem"
        assert resolve(conn, "no such name") is None
        assert resolve(conn, "   ") is None


def test_a_page_is_found_by_its_file_path_under_the_wiki(shared_store) -> None:  # type: ignore[no-untyped-def]
    store = shared_store  # reads only: one index per backend for the module
    with store.engine.connect() as conn:
        assert page_by_path(conn, "nvidia/tma.md") == "hw-tma"
        assert page_by_path(conn, "ptx.md") == "doc-ptx-isa"
        assert page_by_path(conn, "nvidia/tma") is None
        assert page_by_path(conn, "tma.md") is None


def test_page_sources_reads_every_page_asked_for_across_chunks_and_skips_missing_ones(shared_store) -> None:  # type: ignore[no-untyped-def]
    store = shared_store  # reads only: one index per backend for the module
    asked = ["hw-tma", *(f"ghost-{i}" for i in range(600)), "hw-tmem"]  # hw-tmem falls in the second chunk of 500
    with store.engine.connect() as conn:
        found = page_sources(conn, asked)
    assert sorted(found) == ["hw-tma", "hw-tmem"]
    body, line = found["hw-tmem"]
    assert "128 lanes" in body and line > 1  # the body starts after the front matter


def test_a_pages_file_is_named_as_the_repository_holding_the_wiki_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELWIKI_PAGE_FOLDERS", raising=False)
    repo = tmp_path / "KernelWiki"
    (repo / "wiki" / "hardware").mkdir(parents=True)
    (repo / "sources" / "prs").mkdir(parents=True)
    layout = RepositoryFiles.of(repo)  # a repository root: the stored path is the repository's already
    assert layout.file("wiki/hardware/tma.md") == "wiki/hardware/tma.md"
    assert layout.file("sources/prs/PR-1.md") == "sources/prs/PR-1.md"
    assert layout.under_wiki("hardware/tma.md") == "wiki/hardware/tma.md"
    plain = RepositoryFiles.of(repo / "wiki")  # a plain folder (kernelwiki's wiki/): its name, then the path
    assert plain.file("hardware/tma.md") == "wiki/hardware/tma.md"
    assert plain.under_wiki("hardware/tma.md") == "hardware/tma.md"
    assert RepositoryFiles.of(repo / "wiki" / "hardware").file("tma.md") == "hardware/tma.md"
    monkeypatch.setenv("KERNELWIKI_PAGE_FOLDERS", "sources")  # named page folders make the root a repository too
    assert RepositoryFiles.of(repo).file("sources/prs/PR-1.md") == "sources/prs/PR-1.md"
