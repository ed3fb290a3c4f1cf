"""One duplicate-id rule: the first page (in path order) keeps its id; later ones are left out, named at their id line."""

from __future__ import annotations

from snippets.page import Page, PageIds, parse_page


def page(rel: str, page_id: str) -> Page:
    parsed, problems = parse_page(f"---\ntitle: T\nid: {page_id}\n---\nbody\n".encode(), rel)
    assert parsed is not None, problems
    return parsed


def test_first_page_keeps_its_id_and_a_later_one_is_left_out() -> None:
    ids = PageIds()
    assert ids.claim(page("a.md", "x")) is None
    assert ids.claim(page("c.md", "y")) is None
    duplicate = ids.claim(page("b.md", "x"))
    assert str(duplicate) == "b.md:3: error: duplicate id 'x': also used by a.md; this page is left out"
    assert ids.owners == {"x": "a.md", "y": "c.md"}


def test_ids_owned_beforehand_win_and_the_owner_may_claim_again() -> None:
    ids = PageIds({"x": "kept.md"})
    assert ids.claim(page("kept.md", "x")) is None
    assert str(ids.claim(page("new.md", "x"))).startswith("new.md:3: error: duplicate id 'x': also used by kept.md")
