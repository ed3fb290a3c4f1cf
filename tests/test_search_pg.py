"""The PostgreSQL search backend's own pieces: literals built from text, never parsed from it; typo candidates."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.search import SectionDoc
from app.search_pg import MAX_LEXEME, MAX_POSITIONS_PER_WORD, PostgresSearch, tsquery_literal, tsvector_literal, words
from app.text import query_terms


def test_words_are_cut_like_sqlites_unicode61_with_underscore() -> None:
    assert words("cp_async_bulk cp.async.bulk Café naïve hw-tma") == ["cp_async_bulk", "cp", "async", "bulk", "cafe", "naive", "hw", "tma"]
    assert words("x" * 5000) == ["x" * MAX_LEXEME]


def test_query_literals_quote_every_word() -> None:
    assert tsquery_literal(query_terms("cp.async.bulk tensor"), any_term=False) == "('cp_async_bulk':*) & ('tensor':*)"
    assert tsquery_literal(["it's", "a\\b"], any_term=True) == "('it':* & 's':*) | ('a':* & 'b':*)"
    assert tsquery_literal(query_terms("'; DROP TABLE page; -- !(a|b) <-> :*"), any_term=False).count(":*") == 5
    assert tsquery_literal([], any_term=False) == "" and tsquery_literal(["::"], any_term=True) == ""


def test_vector_literals_weight_fields_and_respect_postgres_limits() -> None:
    literal, found = tsvector_literal([("A", "TMA tma"), ("D", "memory")])
    assert literal == "'tma':1A,2A 'memory':3D" and found == {"tma", "memory"}
    literal, _ = tsvector_literal([("D", "w " * 1000)])
    assert literal.count(",") == MAX_POSITIONS_PER_WORD - 1


@pytest.mark.postgres
def test_postgres_accepts_every_literal_and_suggests_near_words(postgres_url: str) -> None:
    from app.db import create_schema, make_engine

    engine = make_engine(postgres_url)
    backend = PostgresSearch()
    create_schema(engine, backend)
    hostile = "it's a \\ back'slash \"quote\" " + "y" * 3000 + " " + "z " * 20000
    with engine.begin() as conn:
        backend.add(conn, [SectionDoc(0, "p", "Tensor Memory", "TMEM", "memory", "", ""), SectionDoc(1, "p", "", "", "", "Hostile", hostile)])
    with engine.connect() as conn:
        assert [h.page_id for h in backend.match(conn, ["it", "s"], False, "", {})] == ["p"]
        assert backend.match(conn, ["y" * 4000], False, "", {})[0].section_id == 1
        assert "memory" in backend.candidates(conn, "memroy") and backend.candidates(conn, "mem") == []
        docs = dict(conn.execute(text("SELECT word, docs FROM search_term")).all())
    assert docs["memory"] == 1 and docs["tensor"] == 1
    with engine.begin() as conn:
        backend.remove_pages(conn, ["p"])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM search_term")).scalar() == 0
    engine.dispose()
