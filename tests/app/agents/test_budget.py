"""Token-budgeted answers: whole sections first within the budget, over a real index and over real HTTP."""

from __future__ import annotations

import math

import pytest

from app.agents.budget import approx_tokens, budgeted, render_context
from app.schemas import SearchPublic, SearchResult, SectionRef


def ranked(*hits: tuple[str, str | None]) -> SearchPublic:
    """A search answer listing (page id, anchor) in this rank order, as any search backend would."""
    results = [
        SearchResult(
            id=pid,
            title=pid,
            type="technique",
            path=f"{pid}.md",
            architectures=[],
            score=1.0 / n,
            section=SectionRef(heading=anchor, anchor=anchor) if anchor else None,
            snippet="",
        )
        for n, (pid, anchor) in enumerate(hits, 1)
    ]
    return SearchPublic(query="q", total=len(results), limit=20, offset=0, results=results, facets={}, took_ms=0.0)


def test_tokens_are_ceil_of_characters_over_four() -> None:
    assert [approx_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_whole_sections_come_first_then_the_start_of_the_best_one_left_over(shared_agent_store) -> None:
    agent_store = shared_agent_store  # reads only: one prepared store per backend for the module
    result = ranked(("agent-demo", "long-notes"), ("agent-demo", "running-a-program"), ("hw-tma", "pitfalls"))
    everything = budgeted(agent_store.pages, result, 100_000, "http://kw")
    long, short, pitfalls = everything.sections
    assert [s.anchor for s in everything.sections] == ["long-notes", "running-a-program", "pitfalls"]
    assert long.tokens > 1000 and not any(s.truncated for s in everything.sections)
    assert everything.used_tokens == sum(s.tokens for s in everything.sections) and everything.left_out == 0

    budget = short.tokens + pitfalls.tokens + 200
    cut = budgeted(agent_store.pages, result, budget, "http://kw")
    assert [s.anchor for s in cut.sections] == ["long-notes", "running-a-program", "pitfalls"]  # rank order kept
    first, second, third = cut.sections
    assert (second.text, third.text) == (short.text, pitfalls.text) and not second.truncated and not third.truncated
    assert first.truncated and first.text.endswith("get_page for the rest]")
    assert long.text.startswith(first.text.split("\n[…")[0]) and "Zebrafish note 0:" in first.text
    assert cut.used_tokens == sum(s.tokens for s in cut.sections) <= budget and cut.left_out == 0


def test_a_budget_too_small_for_anything_answers_with_nothing(shared_agent_store) -> None:
    agent_store = shared_agent_store  # reads only: one prepared store per backend for the module
    context = budgeted(agent_store.pages, ranked(("agent-demo", "long-notes")), 50, "http://kw")
    assert context.sections == [] and context.used_tokens == 0 and context.left_out == 1


def test_rendered_answer_never_costs_more_than_counted(shared_agent_store) -> None:
    agent_store = shared_agent_store  # reads only: one prepared store per backend for the module
    result = ranked(("agent-demo", "running-a-program"), ("hw-tma", "loading-a-tile"), ("agent-demo", "long-notes"))
    for budget in (60, 150, 400, 1200, 5000):
        context = budgeted(agent_store.pages, result, budget, "http://kw")
        assert approx_tokens(render_context(context)) <= context.used_tokens <= budget, budget


def test_a_page_matched_by_name_contributes_its_first_section_and_each_section_counts_once(shared_agent_store) -> None:
    agent_store = shared_agent_store  # reads only: one prepared store per backend for the module
    context = budgeted(agent_store.pages, ranked(("hw-tma", None), ("hw-tma", None), ("gone", "x")), 5000, "http://kw")
    assert [(s.page_id, s.anchor) for s in context.sections] == [("hw-tma", "")]
    assert context.sections[0].text == "The TMA copies tiles between global and shared memory."


def test_code_cut_in_the_middle_is_closed(shared_agent_store) -> None:
    agent_store = shared_agent_store  # reads only: one prepared store per backend for the module
    result = ranked(("agent-demo", "running-a-program"))
    whole = budgeted(agent_store.pages, result, 5000, "http://kw").sections[0]
    lines = whole.text.split("\n")
    fence = next(i for i, line in enumerate(lines) if line.startswith("```cuda"))
    for budget in range(60, whole.tokens):
        context = budgeted(agent_store.pages, result, budget, "http://kw")
        if context.sections and "```cuda" in context.sections[0].text and context.sections[0].truncated:
            text = context.sections[0].text
            assert text.count("```") % 2 == 0, text
            assert lines[fence] in text
            return
    pytest.fail("no budget cut the section inside its code block")


def test_budget_tokens_on_the_search_api(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    plain = agent_live.get("/api/search", params={"q": "empty kernel program"}).json()
    assert plain["context"] is None
    body = agent_live.get("/api/search", params={"q": "empty kernel program", "budget_tokens": 2000}).json()
    context = body["context"]
    assert context["budget_tokens"] == 2000 and "ceil(characters / 4)" in context["approximation"]
    first = next(s for s in context["sections"] if s["anchor"] == "running-a-program")
    assert (first["page_id"], first["heading"]) == ("agent-demo", "Running a program")
    assert first["url"] == f"{agent_live.server.url}/pages/agent-demo.md" and first["truncated"] is False
    assert "__global__ void empty() {}" in first["text"] and "HIDDEN_SETUP_MACRO" not in first["text"]
    assert "ran on NVIDIA H200" in first["evidence"] and "never run" in first["evidence"]
    assert first["tokens"] >= math.ceil(len(first["text"] + first["evidence"]) / 4)
    assert context["used_tokens"] == sum(s["tokens"] for s in context["sections"]) <= 2000


@pytest.mark.parametrize("value", ["0", "49", "100001", "lots"])
def test_budget_tokens_out_of_range_is_a_422_naming_the_parameter(shared_agent_live, value: str) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    response = agent_live.get("/api/search", params={"q": "tma", "budget_tokens": value})
    assert response.status_code == 422
    assert any(d["loc"][-1] == "budget_tokens" for d in response.json()["error"]["detail"])
