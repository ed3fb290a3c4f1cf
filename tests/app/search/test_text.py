"""app.search.text: which terms a text is indexed under, and how excerpts mark query words."""

from __future__ import annotations

import random
import re

import pytest

from app.search.text import ALNUM_RUN, _Terms, arch_forms, excerpt, index_terms, plain_word


def test_identifiers_and_their_forms_go_to_the_identifier_terms_and_their_plain_pieces_do_not() -> None:
    plain, identifiers = index_terms("Issue cp.async.bulk.tensor.2d, then __syncthreads and mbarrier.try_wait.parity.")
    ids = identifiers.split()
    assert {"cp.async.bulk.tensor.2d", "async.bulk.tensor.2d", "bulk.tensor.2d", "tensor.2d"} <= set(ids)
    assert {"__syncthreads", "mbarrier.try_wait.parity", "try_wait.parity", "try_wait"} <= set(ids)
    # Letters-and-digits pieces are the simple tokenizer's to find in the text itself: never listed twice.
    assert not {"cp", "async", "bulk", "tensor", "2d", "syncthreads", "try", "wait", "parity"} & set(ids)
    assert plain == ""
    assert all(not plain_word(term) for term in ids)


def test_architecture_labels_get_their_plain_forms_which_the_text_does_not_spell() -> None:
    plain, identifiers = index_terms("Needs sm_90a; runs on SM100A too.")
    assert plain.split() == ["sm90a", "sm90", "sm100"]  # sm100a is spelled in the text (lowercased by the index)
    assert identifiers.split() == ["sm_90a"]


def test_prose_has_no_extra_terms() -> None:
    assert index_terms("The tensor memory accelerator moves tiles. It is fast.") == ("", "")


@pytest.mark.parametrize(
    ("term", "plain"),
    [("tensor", True), ("sm90a", True), ("tcgen05", True), ("cp.async", False), ("expect_tx", False), ("shared::cta", False)],
)
def test_a_term_is_plain_exactly_when_it_is_letters_and_digits(term: str, plain: bool) -> None:
    assert plain_word(term) is plain
    assert (ALNUM_RUN.fullmatch(term) is not None) is plain


def test_excerpts_mark_whole_words_and_identifiers_by_their_forms() -> None:
    text = "Use setmaxnreg first. Then TMA loads tiles with cp.async.bulk.tensor.2d into shared memory."
    out = excerpt(text, {"tma", "tensor.2d"})  # a suffix form marks the whole identifier
    assert "<mark>TMA</mark>" in out and "<mark>cp.async.bulk.tensor.2d</mark>" in out
    assert "setmaxnreg" in out and "<mark>setmaxnreg" not in out  # `tma` inside a word is no match
    assert excerpt(text, set()) == text  # no words: the text's start, unmarked
    assert excerpt("a < b & c", {"b"}) == "a &lt; <mark>b</mark> &amp; c"


def test_an_excerpt_is_a_window_around_the_first_match_cut_at_words() -> None:
    text = " ".join(f"filler{n}" for n in range(100)) + " the wgmma instruction " + " ".join(f"tail{n}" for n in range(100))
    out = excerpt(text, {"wgmma"}, width=120)
    assert out.startswith("…") and out.endswith("…") and "<mark>wgmma</mark>" in out
    inner = out.strip("…")
    assert not inner.startswith("iller") and len(inner.replace("<mark>", "").replace("</mark>", "")) <= 120


@pytest.mark.parametrize(
    ("word", "forms"),
    [
        ("sm_90a", ["sm90a", "sm90"]),
        ("sm90", ["sm90"]),
        ("sm100f", ["sm100f", "sm100"]),
        ("sm_120a", ["sm120a", "sm120"]),
        ("sm9", []),
        ("smem", []),
    ],
)
def test_an_architecture_word_is_read_as_its_label_and_family(word: str, forms: list[str]) -> None:
    assert arch_forms(word) == forms


def test_terms_are_found_where_a_regex_alternation_of_them_finds_them() -> None:
    # The excerpt's finder (str.find, no compiled regex) must match re.finditer over `a|b|…` longest first:
    # the longest term at the leftmost place, never overlapping, within [pos, endpos).
    rng = random.Random(5)
    letters = "ab.c_"
    for _ in range(400):
        haystack = "".join(rng.choice(letters) for _ in range(rng.randrange(0, 40)))
        wanted = frozenset("".join(rng.choice(letters) for _ in range(rng.randrange(1, 4))) for _ in range(rng.randrange(1, 5)))
        pos, endpos = sorted(rng.randrange(0, len(haystack) + 1) for _ in range(2))
        regex = re.compile("|".join(re.escape(w) for w in sorted(wanted, key=len, reverse=True)))
        expected = [m.span() for m in regex.finditer(haystack, pos, endpos)]
        assert list(_Terms(wanted).spans(haystack, pos, endpos)) == expected, (haystack, wanted, pos, endpos)
