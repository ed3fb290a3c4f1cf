"""Search: GPU identifiers as words, ranking, typos, filters, facets, hostile input (both backends)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from app.index.filters import Filters
from app.search import FACETS
from tests.app.hostile_input import HOSTILE


def ids(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.id for r in result.results]


@pytest.mark.parametrize(
    "query,page,anchor",
    [
        ("cp.async.bulk", "hw-tma", "loading-a-tile"),
        ("shared::cluster", "hw-tma", "loading-a-tile"),
        ("expect_tx", "hw-tma", "loading-a-tile"),
        ("__syncthreads", "hw-tma", "pitfalls"),
        ("m16n8k16", "hw-tma", "pitfalls"),
        ("tcgen05.mma", "hw-tmem", "allocation"),
        ("wgmma.mma_async", "hw-mbarrier", "phases"),
    ],
)
def test_gpu_identifiers_are_words_and_hits_name_their_section(shared_store, query: str, page: str, anchor: str) -> None:
    store = shared_store  # reads only: one index per backend for the module
    result = store.searcher.search(query, Filters())
    assert ids(result)[0] == page
    assert result.results[0].section is not None and result.results[0].section.anchor == anchor
    assert "<mark>" in result.results[0].snippet


def test_exact_alias_title_or_id_ranks_first(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert ids(store.searcher.search("TMEM", Filters()))[0] == "hw-tmem"
    assert ids(store.searcher.search("tensor memory", Filters()))[0] == "hw-tmem"
    assert ids(store.searcher.search("hw-mbarrier", Filters()))[0] == "hw-mbarrier"
    assert ids(store.searcher.search("UTMALDG", Filters()))[0] == "hw-tma"


def test_prefixes_match(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert "hw-mbarrier" in ids(store.searcher.search("synchroniz", Filters()))
    assert ids(store.searcher.search("accumul", Filters())) == ["hw-tmem"]


def test_typos_in_long_words_still_find_the_page_and_suggest(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    result = store.searcher.search("tensr memroy", Filters())
    assert "hw-tmem" in ids(result)
    assert result.did_you_mean == "tensor memory"
    assert store.searcher.search("tensor memory", Filters()).did_you_mean is None


def test_arch_filter_matches_by_family(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    for arch in ("sm90", "sm90a", "sm_90a", "SM90"):
        found = ids(store.searcher.search("memory", Filters(arch=arch)))
        assert "hw-tma" in found and "hw-tmem" not in found, arch
    for arch in ("sm100", "sm100a"):
        assert {"hw-tma", "hw-tmem"} <= set(ids(store.searcher.search("memory", Filters(arch=arch))))


def test_type_tag_language_confidence_filters(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert ids(store.searcher.search("PTX", Filters(type="source"))) == ["doc-ptx-isa"]
    assert ids(store.searcher.search("memory", Filters(tag="blackwell"))) == ["hw-tmem"]
    assert ids(store.searcher.search("memory", Filters(language="ptx"))) == ["hw-tma"]
    assert ids(store.searcher.search("memory", Filters(confidence="source-reported"))) == ["hw-tmem"]


def test_facets_only_when_asked_paging_total_and_timing(store) -> None:
    assert store.searcher.search("memory", Filters(), limit=1).facets == {}
    assert set(store.searcher.search("memory", Filters(), limit=1, facets=("tag",)).facets) == {"tag"}
    started = time.perf_counter()
    result = store.searcher.search("memory", Filters(), limit=1, offset=0, facets=FACETS)
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert result.total >= 2 and len(result.results) == 1 and result.next is not None
    assert "facets=type%2Carch%2Ctag" in result.next  # the next window counts the same facets
    assert result.facets["type"]["hardware"] == result.total
    assert result.facets["arch"]["sm100"] >= 2
    assert result.facets["tag"]["memory"] >= 2
    assert 0 < result.took_ms <= elapsed_ms  # measured, in milliseconds, within the call
    second = store.searcher.search("memory", Filters(), limit=1, offset=1)
    assert ids(second) != ids(result)


@pytest.mark.parametrize("query", HOSTILE, ids=[repr(q[:20]) for q in HOSTILE])
def test_any_string_gives_results_or_none(shared_store, query: str) -> None:  # noqa: ANN001
    store = shared_store  # they only read: one index per backend for the 66 cases
    result = store.searcher.search(query, Filters())
    assert len(result.results) <= min(result.total, 20)  # the default window
    assert (result.next is not None) == (len(result.results) < result.total)  # a next window exactly when hits remain
    for r in result.results:
        assert "<script>" not in r.snippet
    assert store.searcher.search("TMA", Filters()).total >= 1  # the index is intact afterwards


def test_an_exact_name_match_still_obeys_the_filters(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert "hw-tmem" not in ids(store.searcher.search("TMEM", Filters(arch="sm90")))
    assert ids(store.searcher.search("TMEM", Filters(arch="sm100")))[0] == "hw-tmem"


# -- the tantivy engine: questions, architecture words, sections, highlights, typos, cache, following the SQL index --

QUESTIONS = {
    "how do I allocate tensor memory": "hw-tmem",
    "what is the accumulator of tcgen05.mma": "hw-tmem",
    "how does a thread wait for an mbarrier phase": "hw-mbarrier",
    "which instruction copies a tile with the TMA": "hw-tma",
}


@pytest.mark.parametrize("question,page", QUESTIONS.items())
def test_plain_english_questions_rank_by_the_words_that_matter(shared_store, question: str, page: str) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert ids(store.searcher.search(question, Filters()))[0] == page


def test_a_question_of_filler_words_only_still_searches_them(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert (
        store.searcher.search("the and of", Filters()).total == store.searcher.search("the and of", Filters()).total
    )  # no error
    assert store.searcher.search("what is TMA", Filters()).results[0].id == "hw-tma"


@pytest.mark.parametrize("label", ["sm90a", "SM90", "sm_90a", "sm90", "SM_90A"])
def test_architecture_labels_as_the_ui_writes_them_are_query_words(shared_store, label: str) -> None:
    store = shared_store  # reads only: one index per backend for the module
    found = ids(store.searcher.search(label, Filters()))
    assert "hw-tma" in found and "hw-mbarrier" in found and "hw-tmem" not in found, (label, found)


@pytest.mark.parametrize("label", ["sm100a", "sm_100a", "SM100", "sm100"])
def test_blackwell_labels_find_the_blackwell_pages(shared_store, label: str) -> None:
    store = shared_store  # reads only: one index per backend for the module
    assert {"hw-tma", "hw-tmem", "hw-mbarrier"} <= set(ids(store.searcher.search(label, Filters())))


QUERIES = ["tma", "memory", "TMEM", "cp.async.bulk", "sm90a", "mbarrier", "tensr memroy", "PTX", "allocation", "tile", "hw-tma"]


def test_every_hit_names_a_section_and_has_an_excerpt(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    for query in QUERIES:
        for r in store.searcher.search(query, Filters(), limit=50).results:
            assert r.section is not None and r.section.heading, (query, r.id)
            assert r.snippet.strip(), (query, r.id)


def test_highlights_cover_whole_words_only(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    import re

    marked = 0
    for query in QUERIES + ["tm", "async", "cluster", "tensor"]:
        for r in store.searcher.search(query, Filters(), limit=50).results:
            for m in re.finditer(r"(\w?)<mark>(.*?)</mark>(\w?)", r.snippet):
                marked += 1
                assert not m.group(1) and not m.group(3), (query, r.id, r.snippet)
    assert marked > 10


def test_a_compound_identifier_is_marked_whole_when_a_prefix_of_it_is_searched(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    snippet = store.searcher.search("cp.async.bulk", Filters()).results[0].snippet
    assert "<mark>cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes</mark>" in snippet


def test_typo_correction_is_bounded_to_a_few_words_and_only_runs_without_hits(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    near_misses = " ".join(["memroy", "tensr", "allocaton", "barirer", "phasse", "tilles", "accumulats", "shaerd"] * 4)
    result = store.searcher.search(near_misses, Filters())
    assert result.did_you_mean is None or len(set(result.did_you_mean.split()) - set(near_misses.split())) <= 4
    assert store.searcher.search("memory", Filters()).did_you_mean is None  # a query with hits is never corrected
    assert store.searcher.search("swizzel", Filters()).did_you_mean is None  # nothing near enough: no suggestion, no error


def test_paging_counts_exactly_and_windows_do_not_overlap(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    everything = store.searcher.search("memory", Filters(), limit=200)
    pages = [ids(store.searcher.search("memory", Filters(), limit=1, offset=i)) for i in range(everything.total)]
    assert [p[0] for p in pages] == ids(everything) and everything.total == len(everything.results)
    assert store.searcher.search("memory", Filters(), limit=1, offset=everything.total).results == []


def test_a_reindex_is_searchable_at_once_and_the_cache_follows_it(store, wiki_dir) -> None:
    assert store.searcher.search("quokka", Filters()).total == 0
    tma = wiki_dir / "nvidia" / "tma.md"
    tma.write_text(tma.read_text() + "\n## Quokka\n\nA quokka copies tiles.\n")
    store.reindex(wiki_dir)
    hit = store.searcher.search("quokka", Filters()).results[0]
    assert hit.id == "hw-tma" and hit.section is not None and hit.section.anchor == "quokka"
    (wiki_dir / "nvidia" / "tmem.md").unlink()
    store.reindex(wiki_dir)
    assert "hw-tmem" not in ids(store.searcher.search("memory", Filters()))
    assert store.searcher.search("TMEM", Filters()).total == 0


def test_a_words_expansions_follow_the_index_they_were_read_from(store, wiki_dir) -> None:
    """Expansions are kept per searcher: a word read before a reindex is read again after it."""
    assert store.searcher.search("numbat", Filters()).total == 0  # no indexed word begins so (yet)
    tma = wiki_dir / "nvidia" / "tma.md"
    tma.write_text(tma.read_text() + "\n## Marsupials\n\nA numbatfish copies tiles.\n")
    store.reindex(wiki_dir)
    found = store.searcher.search("numbat", Filters())
    assert ids(found) == ["hw-tma"] and found.did_you_mean is None  # a prefix match, not a typo fix


def test_an_edited_page_answers_with_its_new_text_and_what_it_replaced_is_let_go(store, wiki_dir) -> None:
    engine = store.search_engine
    counts = (engine.pages.searcher.num_docs, engine.sections.searcher.num_docs)
    first = engine._folder
    tma = wiki_dir / "nvidia" / "tma.md"
    lead = "The TMA copies tiles between global and shared memory."
    assert lead in tma.read_text()
    tma.write_text(tma.read_text().replace(lead, "The TMA copies wallaby tiles between global and shared memory."))
    store.reindex(wiki_dir)
    hit = store.searcher.search("wallaby", Filters()).results[0]
    assert hit.id == "hw-tma" and hit.snippet == "The TMA copies <mark>wallaby</mark> tiles between global and shared memory."
    # The edited page's old documents were deleted, not kept beside; the generation it replaced was removed.
    assert (engine.pages.searcher.num_docs, engine.sections.searcher.num_docs) == counts
    assert engine._folder != first
    assert [p.name for p in engine.directory.glob("g*")] == [engine._folder]


def test_what_a_hit_showed_is_read_again_after_a_reindex_changed_it(store, wiki_dir) -> None:
    # Each process keeps the page and section data it decoded, per generation (_Tantivy.data): an edit must
    # never answer with the title or section text kept from the generation before it.
    before = store.searcher.search("hw-tma", Filters()).results[0]
    assert (before.id, before.title) == ("hw-tma", "Tensor Memory Accelerator (TMA)")
    kept = store.search_engine.pages
    tma = wiki_dir / "nvidia" / "tma.md"
    text = tma.read_text()
    lead = "The TMA copies tiles between global and shared memory."
    tma.write_text(
        text.replace("title: Tensor Memory Accelerator (TMA)", "title: Tensor Memory Accelerator, renamed").replace(
            lead, "The TMA copies numbat tiles between global and shared memory."
        )
    )
    store.reindex(wiki_dir)
    after = store.searcher.search("hw-tma", Filters()).results[0]
    assert (after.id, after.title) == ("hw-tma", "Tensor Memory Accelerator, renamed")
    assert store.searcher.search("numbat", Filters()).results[0].snippet.startswith("The TMA copies <mark>numbat</mark>")
    assert store.search_engine.pages is not kept


def test_a_reindex_for_a_process_that_does_not_search_builds_no_full_text_index(db_url: str, wiki_dir) -> None:
    """`kernelwiki index` (and the other CLI commands that do not search) index SQL only: servers build their own."""
    from app.store import Store

    store = Store(db_url)
    try:
        store.create_schema()
        report = store.reindex(wiki_dir, full_text=False)
        assert "hw-tmem" in report.added
        assert store.search_engine.generation is None and store.search_engine.pages.searcher.num_docs == 0
        assert ids(store.searcher.search("TMEM", Filters()))[0] == "hw-tmem"  # the first search builds it from the SQL rows
    finally:
        store.engine.dispose()


def test_another_process_reindexing_is_followed_by_generation(db_url: str, wiki_dir) -> None:
    """A second Store on the same database stands for another process (a CLI `kernelwiki index`)."""
    from app.store import Store

    reader, writer = Store(db_url), Store(db_url)
    try:
        reader.create_schema()
        writer.reindex(wiki_dir)
        assert ids(reader.searcher.search("TMEM", Filters()))[0] == "hw-tmem"  # built from the SQL rows on first use
        (wiki_dir / "ptx.md").write_text((wiki_dir / "ptx.md").read_text() + "\nwombat\n")
        writer.reindex(wiki_dir)
        assert ids(reader.searcher.search("wombat", Filters())) == ["doc-ptx-isa"]
    finally:
        reader.engine.dispose()
        writer.engine.dispose()


def test_filter_values_that_do_not_exist_are_named_with_the_allowed_values(shared_store) -> None:
    store = shared_store  # reads only: one index per backend for the module
    problems = store.searcher.filter_problems(Filters(type="bogus", arch="sm999", confidence="maybe"))
    assert [p.parameter for p in problems] == ["type", "arch", "confidence"]
    assert "hardware" in problems[0].allowed and "sm90a" in problems[1].allowed
    assert set(problems[2].allowed) == {"verified", "source-reported"}
    assert "bogus" in problems[0].message and "hardware" in problems[0].message
    assert store.searcher.filter_problems(Filters(type="hardware", arch="SM_90A", confidence="verified", tag="anything")) == []


def test_the_api_answers_422_for_unknown_filter_values_and_the_search_page_shows_why(live) -> None:
    for param, value in [("type", "bogus"), ("arch", "sm999"), ("confidence", "maybe")]:
        response = live.get("/api/search", params={"q": "memory", param: value})
        assert response.status_code == 422, (param, response.text)
        detail = response.json()["error"]["detail"]
        assert detail[0]["loc"] == ["query", param] and detail[0]["allowed"]
    page = live.get("/search", params={"q": "memory", "arch": "sm999"}, headers={"accept": "text/html"})
    assert page.status_code == 422 and "sm999" in page.text and "sm90a" in page.text
    assert live.get("/api/search", params={"q": "memory", "arch": "sm_90a"}).status_code == 200


@pytest.mark.postgres
def test_sqlite_and_postgresql_answer_identically(tmp_path, wiki_dir, postgres_url: str) -> None:
    from app.store import Store

    answers = []
    for url in (f"sqlite:///{tmp_path / 'same.db'}", postgres_url):
        s = Store(url)
        s.create_schema()
        s.reindex(wiki_dir)
        answers.append(
            [[(r.id, r.section, r.snippet, r.score) for r in s.searcher.search(q, Filters(), limit=50).results] for q in QUERIES]
        )
        s.engine.dispose()
    assert answers[0] == answers[1]


def test_a_serving_engine_asks_for_other_processes_reindexes_at_most_every_refresh_interval(db_url: str, wiki_dir) -> None:
    from app.search import SearchEngine
    from app.store import Store

    reader, writer = Store(db_url, search_engine=SearchEngine(refresh_s=3600)), Store(db_url)
    try:
        writer.create_schema()
        writer.reindex(wiki_dir)
        reader.search_engine._checked = time.monotonic()  # as a first sync does before it has opened a generation
        assert reader.search_engine.due()  # so a search meanwhile syncs (and waits for it) instead of finding nothing
        assert ids(reader.searcher.search("TMEM", Filters()))[0] == "hw-tmem"
        (wiki_dir / "ptx.md").write_text((wiki_dir / "ptx.md").read_text() + "\nwombat\n")
        writer.reindex(wiki_dir)
        assert ids(reader.searcher.search("wombat", Filters())) == []  # within the interval: the last generation it saw
        reader.search_engine.refresh_s = 0  # as if the interval had passed
        assert ids(reader.searcher.search("wombat", Filters())) == ["doc-ptx-isa"]
        reader.search_engine.refresh_s = 3600
        assert not reader.search_engine.due()
        with reader.search_engine.writing():  # this process reindexing: its commit may land any time, so every search asks
            assert reader.search_engine.due()
        assert not reader.search_engine.due()
        (wiki_dir / "ptx.md").write_text((wiki_dir / "ptx.md").read_text() + "\nnumbat\n")
        reader.reindex(wiki_dir)  # its own reindex: seen at once
        assert ids(reader.searcher.search("numbat", Filters())) == ["doc-ptx-isa"]
    finally:
        reader.engine.dispose()
        writer.engine.dispose()


RANKING_WIKI = Path(__file__).resolve().parents[2] / "fixtures" / "ranking_wiki"


def _ranked(db_url: str, root: Path, query: str) -> list[str]:
    from app.store import Store

    store = Store(db_url)
    try:
        store.create_schema()
        store.reindex(root)
        return ids(store.searcher.search(query, Filters()))
    finally:
        store.engine.dispose()


def test_the_page_whose_subject_a_term_is_ranks_above_one_naming_it_once_in_passing(db_url: str, tmp_path: Path) -> None:
    """TMA's page names `tcgen05.ld` once, in a diagram; TMEM's uses it throughout its body (no heading names it)."""
    wiki = tmp_path / "wiki"
    shutil.copytree(RANKING_WIKI, wiki)
    tmem = wiki / "hardware" / "tmem.md"
    assert "tcgen05.ld" not in "".join(line for line in tmem.read_text().splitlines() if line.startswith("#"))
    assert _ranked(db_url, wiki, "tcgen05.ld") == ["hw-tensor-memory", "hw-tma-unit"]
    # Named once, but in a heading: the heading's boost ranks it first as well.
    text = tmem.read_text()
    body = text.split("# Reading accumulators back")[1].split("# Writing into it")[0]
    once = text.replace(body, "\n\nThe epilogue reads the accumulator back into registers.\n\n")
    tmem.write_text(once.replace("# Reading accumulators back", "# Reading accumulators with tcgen05.ld"))
    assert tmem.read_text().count("tcgen05.ld") == 1
    assert _ranked(db_url, wiki, "tcgen05.ld") == ["hw-tensor-memory", "hw-tma-unit"]
