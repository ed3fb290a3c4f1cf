"""Search: GPU identifiers as words, ranking, typos, filters, facets, hostile input (both backends)."""

from __future__ import annotations

import pytest

from app.store import Filters


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
def test_gpu_identifiers_are_words_and_hits_name_their_section(store, query: str, page: str, anchor: str) -> None:
    result = store.search(query, Filters())
    assert ids(result)[0] == page
    assert result.results[0].section is not None and result.results[0].section.anchor == anchor
    assert "<mark>" in result.results[0].snippet


def test_exact_alias_title_or_id_ranks_first(store) -> None:
    assert ids(store.search("TMEM", Filters()))[0] == "hw-tmem"
    assert ids(store.search("tensor memory", Filters()))[0] == "hw-tmem"
    assert ids(store.search("hw-mbarrier", Filters()))[0] == "hw-mbarrier"
    assert ids(store.search("UTMALDG", Filters()))[0] == "hw-tma"


def test_prefixes_match(store) -> None:
    assert "hw-mbarrier" in ids(store.search("synchroniz", Filters()))
    assert ids(store.search("accumul", Filters())) == ["hw-tmem"]


def test_typos_in_long_words_still_find_the_page_and_suggest(store) -> None:
    result = store.search("tensr memroy", Filters())
    assert "hw-tmem" in ids(result)
    assert result.did_you_mean == "tensor memory"
    assert store.search("tensor memory", Filters()).did_you_mean is None


def test_arch_filter_matches_by_family(store) -> None:
    for arch in ("sm90", "sm90a", "sm_90a", "SM90"):
        found = ids(store.search("memory", Filters(arch=arch)))
        assert "hw-tma" in found and "hw-tmem" not in found, arch
    for arch in ("sm100", "sm100a"):
        assert {"hw-tma", "hw-tmem"} <= set(ids(store.search("memory", Filters(arch=arch))))


def test_type_tag_language_confidence_filters(store) -> None:
    assert ids(store.search("PTX", Filters(type="source"))) == ["doc-ptx-isa"]
    assert ids(store.search("memory", Filters(tag="blackwell"))) == ["hw-tmem"]
    assert ids(store.search("memory", Filters(language="ptx"))) == ["hw-tma"]
    assert ids(store.search("memory", Filters(confidence="source-reported"))) == ["hw-tmem"]


def test_facets_paging_total_and_timing(store) -> None:
    result = store.search("memory", Filters(), limit=1, offset=0)
    assert result.total >= 2 and len(result.results) == 1 and result.next is not None
    assert result.facets["type"]["hardware"] == result.total
    assert result.facets["arch"]["sm100"] >= 2
    assert result.facets["tag"]["memory"] >= 2
    assert result.took_ms >= 0
    second = store.search("memory", Filters(), limit=1, offset=1)
    assert ids(second) != ids(result)


HOSTILE = [
    '"', '""', "'", "(", ")", "((((", 'tma" OR "1"="1', "AND", "OR", "NOT", "NEAR", "NEAR(a b)", "*", "a*b",
    "'; DROP TABLE page; --", "tma AND", "^tma", "title:tma", "{}", "\\", "%", "_", "::", ".", "..",
    "x" * 10_000, "tensor " * 2000, "память", "共享内存", "🔥💥", "\x00", "\u202e", "<script>alert(1)</script>",
]


@pytest.mark.parametrize("query", HOSTILE, ids=[repr(q[:20]) for q in HOSTILE])
def test_any_string_gives_results_or_none(store, query: str) -> None:
    result = store.search(query, Filters())
    assert result.total == len(result.results) or result.total > len(result.results)
    for r in result.results:
        assert "<script>" not in r.snippet
    assert store.search("TMA", Filters()).total >= 1  # the index is intact afterwards


def test_an_exact_name_match_still_obeys_the_filters(store) -> None:
    assert "hw-tmem" not in ids(store.search("TMEM", Filters(arch="sm90")))
    assert ids(store.search("TMEM", Filters(arch="sm100")))[0] == "hw-tmem"
