"""app/pages.py: the pages service answers the same with the request's connection or its own, and keeps graph
and facet answers per index generation."""

from __future__ import annotations

from pathlib import Path

from app.index.filters import Filters
from app.pages import page_view


def test_a_page_is_the_same_with_the_requests_connection_or_the_services_own(store) -> None:  # type: ignore[no-untyped-def]
    own = store.pages.get_page("hw-tma")
    with store.engine.connect() as conn:
        assert store.pages.get_page("hw-tma", conn=conn) == own == page_view(conn, "hw-tma", store.evidence, store.pages.files)
        assert page_view(conn, "no-such-page", store.evidence, store.pages.files) is None
    assert own is not None and own.title.startswith("Tensor Memory Accelerator")
    assert {link.id for link in own.related} == {"hw-tmem", "hw-mbarrier"}
    assert [b.id for b in own.backlinks] == ["hw-mbarrier", "hw-tmem"]


def test_graph_and_facet_answers_are_kept_until_a_reindex_changes_the_wiki(store, wiki_dir: Path) -> None:  # type: ignore[no-untyped-def]
    pages = store.pages
    first = pages.graph()
    assert pages.graph() is first  # kept: the same object
    with store.engine.connect() as conn:
        facets = pages.page_facets(conn, Filters())
        assert pages.page_facets(conn, Filters()) is facets
    assert first["total_nodes"] == 4
    (wiki_dir / "nvidia" / "mbarrier.md").unlink()
    store.reindex(wiki_dir)
    after = pages.graph()
    assert after is not first and after["total_nodes"] == 3
    with store.engine.connect() as conn:
        assert pages.page_facets(conn, Filters())["type"]["hardware"] == facets["type"]["hardware"] - 1
