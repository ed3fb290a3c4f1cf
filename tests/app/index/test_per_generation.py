"""app/index/per_generation.py: an answer is made once per index generation, and again after a reindex changes it."""

from __future__ import annotations

from pathlib import Path

from app.index.per_generation import PerGeneration


def test_an_answer_is_made_once_per_generation_and_again_after_a_change(store, wiki_dir: Path) -> None:  # type: ignore[no-untyped-def]
    cache = PerGeneration(4)
    made: list[str] = []

    def make(label: str) -> str:
        made.append(label)
        return label

    with store.engine.connect() as conn:
        assert cache.get(conn, "k", lambda: make("first")) == "first"
        assert cache.get(conn, "k", lambda: make("again")) == "first"  # same generation: kept
        assert cache.get(conn, "other", lambda: make("other")) == "other"  # another key: its own answer
    store.reindex(wiki_dir)  # nothing changed: the generation stays
    with store.engine.connect() as conn:
        assert cache.get(conn, "k", lambda: make("unchanged")) == "first"
    page = wiki_dir / "nvidia" / "tmem.md"
    page.write_text(page.read_text().replace("128 lanes", "128 lanes (edited)"))
    store.reindex(wiki_dir)
    with store.engine.connect() as conn:
        assert cache.get(conn, "k", lambda: make("after the edit")) == "after the edit"
    assert made == ["first", "other", "after the edit"]


def test_a_size_of_zero_keeps_nothing(store) -> None:  # type: ignore[no-untyped-def]
    cache = PerGeneration(0)
    with store.engine.connect() as conn:
        assert [cache.get(conn, "k", lambda n=n: n) for n in range(3)] == [0, 1, 2]
