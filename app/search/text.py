"""Text rules of search: what a word is, which extra forms a GPU identifier is indexed under, excerpts.

A word is a run of letters, digits and '_', or such runs joined by '.' or '::',
so `cp.async.bulk.tensor.2d`, `shared::cluster`, `__syncthreads`, `expect_tx`,
`m16n8k16` and `tcgen05.ld` are single terms. Indexed text also carries, for
each compound identifier, its parts (`tensor`), its suffixes (`shared::cluster…`
inside a longer mnemonic) and, for underscored words, their pieces
(`syncthreads`, `expect`, `tx`); a prefix query for `cp.async.bulk` then
finds `cp.async.bulk.tensor.2d`. Architecture labels in any spelling the UI
or a page uses (`sm_90a`, `SM90A`, `sm90a`) are indexed as `sm90a` and as
their family `sm90`, and queries are read the same way.

The index (app/search/) keeps these terms in two fields per text: plain
words (letters and digits only), which tantivy's fast simple tokenizer finds
in the text itself, and identifier terms (with '.', '::' or '_'), which
`index_terms` lists; `plain_word` says which of the two a term belongs to.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterator

from snippets.architectures import family, normalize_architecture

WORD_PATTERN = r"\w+(?:(?:\.|::)\w+)*"
"""A word, or words joined by '.' or '::' (PTX mnemonics, CUDA scopes)."""
WORD = re.compile(WORD_PATTERN)
SEPARATOR = re.compile(r"\.|::")
ARCH = re.compile(r"sm_?(\d{2,3})([af]?)")
"""An architecture label, lowercased: sm90, sm_90a, sm100f."""
NEEDS_EXTRAS = re.compile(r"(?<!\w)(?=\w*_|\w+(?:\.|::)\w|(?i:sm_?\d))\w+(?:(?:\.|::)\w+)*")
"""Words that get extra index forms: compounds, underscored words, architecture labels (tried at word starts only)."""

MAX_TERMS = 32
"""Query words beyond this are dropped: a 10 kB query is cut, not refused."""
MAX_WORD = 200
"""Longer words are not indexed (the tokenizer drops them) and never match."""

STOP_WORDS = frozenset(
    """a about an and any are as at be been but by can could do does did for from had has have how i if in
    into is it its me my no not of on or our should so than that the their them then there these they this
    those to use used using was we were what when where which while who why will with would you your""".split()
)
"""English filler words dropped from a question ("how do I allocate tensor memory" → allocate tensor memory)."""


def fold(value: str) -> str:
    """Lowercase without diacritics, as the index's tokenizer does (lowercase + ASCII folding)."""
    lowered = value.lower()
    if lowered.isascii():
        return lowered
    return "".join(c for c in unicodedata.normalize("NFKD", lowered) if not unicodedata.combining(c))


def arch_forms(word: str) -> list[str]:
    """`sm_90a` → [`sm90a`, `sm90`]; `sm90` → [`sm90`]; anything else → [] (spelling and family: snippets.architectures)."""
    if ARCH.fullmatch(word) is None:
        return []
    exact = normalize_architecture(word)
    general = family(exact)
    return [exact] if exact == general else [exact, general]


def word_forms(word: str) -> list[str]:
    """The extra index forms of one lowercased word (not the word itself)."""
    forms: list[str] = []
    pieces = SEPARATOR.split(word)
    if len(pieces) > 1:
        # Every suffix keeps its separators: `shared::cluster` then prefixes the suffix of a longer mnemonic.
        starts = [m.end() for m in SEPARATOR.finditer(word)]
        forms.extend(word[s:] for s in starts[:-1])
        forms.extend(pieces)
    for piece in pieces:
        if "_" in piece:
            stripped = piece.strip("_")
            if stripped and stripped != piece:
                forms.append(stripped)
            subwords = [p for p in stripped.split("_") if p]
            if len(subwords) > 1:
                forms.extend(subwords)
        forms.extend(arch_forms(piece))
    return [f for f in dict.fromkeys(forms) if f and f != word]


ARCH_HINT = re.compile(r"sm_?\d", re.IGNORECASE)


def _plain(text: str) -> bool:
    """True when `text` has no identifier that needs extra forms (string scans only: most prose is plain)."""
    if "_" in text or ":" in text:
        return False
    if "." in text and "." in text.replace(". ", " ").replace(".\n", "\n").rstrip(".`'\")\n "):
        return False  # a dot inside a word: cp.async, 3.5
    return ("sm" not in text and "SM" not in text and "Sm" not in text) or ARCH_HINT.search(text) is None


ALNUM_RUN = re.compile(r"[^\W_]+")
"""A run of letters and digits: what tantivy's simple tokenizer keeps of a text."""


def plain_word(term: str) -> bool:
    """True for a term of letters and digits only (`tensor`, `sm90a`); False for an identifier term (`cp.async`, `expect_tx`)."""
    return term.isalnum()


def index_terms(text: str) -> tuple[str, str]:
    """The terms of `text`'s identifiers that the simple tokenizer cannot find in it, space-separated: (plain, identifier).

    Plain: architecture forms (`sm90a` and `sm90` for `sm_90a`). Identifier: every
    word with '.', '::' or '_' and its forms of that kind (suffixes, underscored
    pieces). The letters-and-digits pieces of an identifier (`cp`, `async`,
    `syncthreads`) are not listed: the simple tokenizer finds them in the text.
    """
    if _plain(text):
        return "", ""
    plain: list[str] = []
    identifiers: list[str] = []
    for token in NEEDS_EXTRAS.findall(text):
        token_plain, token_identifiers = _token_terms(token)
        plain.extend(token_plain)
        identifiers.extend(token_identifiers)
    return " ".join(plain), " ".join(identifiers)


@functools.lru_cache(maxsize=16384)
def _token_terms(token: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One identifier's extra terms for `index_terms`: (plain, identifier); remembered, for a wiki repeats its identifiers.

    Building the full-text index of 30,000 pages asked this of 62,000 tokens of section text, 15,000 of them
    distinct: `index_terms` over those texts 1.5-1.7 -> 1.1-1.3 s of CPU. A build forgets them at its end
    (`forget_terms`): kept, 15,000 took 4.5 MB of the building process.
    """
    if not token.strip("_"):
        return (), ()
    word = fold(token)
    runs = ALNUM_RUN.findall(word)
    plain: list[str] = []
    identifiers: list[str] = []
    for form in (word, *word_forms(word)):
        if not plain_word(form):
            identifiers.append(form)
        elif form not in runs:
            plain.append(form)
    return tuple(plain), tuple(identifiers)


def forget_terms() -> None:
    """Let go of the identifiers `index_terms` remembered (at the end of a build)."""
    _token_terms.cache_clear()


def words(text: str) -> list[str]:
    """The words of a text in index form (lowercased, folded), long words dropped."""
    return [w for w in (fold(m.group(0)) for m in WORD.finditer(text)) if len(w) <= MAX_WORD]


def question_words(query: str) -> list[str]:
    """The distinct words of a query without English filler words (all of them when nothing else is left)."""
    found = list(dict.fromkeys(words(query)))[:MAX_TERMS]
    kept = [w for w in found if w not in STOP_WORDS]
    return kept or found


SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ies", "ed", "es", "ly", "e", "s")
"""English endings cut off a question's word to find its relatives (`allocate` → `allocat…`: allocation, allocated)."""
ROOT_MIN = 4


def root(word: str) -> str | None:
    """The stem a longer alphabetic word shares with its relatives, or None (`allocate` → `allocat`)."""
    if len(word) < ROOT_MIN + 2 or not word.isalpha():
        return None
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= ROOT_MIN:
            return word[: -len(suffix)]
    return None


def phrases(words_: list[str], longest: int = 4) -> list[str]:
    """Every run of up to `longest` consecutive words, joined by one space (to meet aliases and titles)."""
    return [" ".join(words_[i : i + n]) for n in range(1, longest + 1) for i in range(len(words_) - n + 1)]


def _marked(token: str, wanted: frozenset[str]) -> bool:
    word = fold(token)
    if word in wanted:
        return True
    if "_" in word or "." in word or ":" in word or word.startswith("sm"):  # only these have other forms
        return any(f in wanted for f in word_forms(word))
    return False


class _Terms:
    """Finds the wanted terms as a regex alternation of them (longest first) would, by `str.find`, without compiling one.

    At each position the longest term found there is taken, and the search goes on
    after it (matches never overlap), as `re.finditer` does. Compiling that regex
    cost 75-160 µs a query (nearly every query of a distinct stream brings a new
    set of terms), more than all its excerpts' scans.
    """

    __slots__ = ("terms",)

    def __init__(self, wanted: frozenset[str]) -> None:
        self.terms = sorted(wanted, key=len, reverse=True)

    def spans(self, haystack: str, pos: int, endpos: int) -> Iterator[tuple[int, int]]:
        terms = self.terms
        found = [haystack.find(t, pos, endpos) for t in terms]  # each term's next place at or after `pos` (-1: none)
        while True:
            best = -1
            length = 0
            for i, term in enumerate(terms):
                at = found[i]
                if 0 <= at < pos:
                    at = found[i] = haystack.find(term, pos, endpos)
                if at >= 0 and (best < 0 or at < best):  # a tie keeps the longer term (listed first)
                    best, length = at, len(term)
            if best < 0:
                return
            pos = best + length
            yield best, pos


class _Pattern:
    """The wanted terms as one case-blind regex (for a text whose lowercase form moves offsets: see `excerpt`)."""

    __slots__ = ("pattern",)

    def __init__(self, wanted: frozenset[str]) -> None:
        self.pattern = re.compile("|".join(re.escape(w) for w in sorted(wanted, key=len, reverse=True)), re.IGNORECASE)

    def spans(self, haystack: str, pos: int, endpos: int) -> Iterator[tuple[int, int]]:
        return (m.span() for m in self.pattern.finditer(haystack, pos, endpos))


def _word_char(c: str) -> bool:
    return c.isalnum() or c in "_.:"


def _word_start(flat: str, at: int) -> int:
    """Where the word holding position `at` begins, or -1 when `at` follows a letter or digit (no word or form begins there)."""
    if at == 0:
        return 0
    before = flat[at - 1]
    if before.isascii() and before.isalnum():
        return -1  # inside a word: `tma` in `setmaxnreg` (the word is judged where it or a form begins)
    if not _word_char(before):
        return at
    start = at
    floor = max(0, at - MAX_WORD)
    while start > floor and _word_char(flat[start - 1]):
        start -= 1
    while start < at and not flat[start].isalnum() and flat[start] != "_":
        start += 1  # a word never begins with '.' or ':'
    return start


def _marks(
    flat: str, haystack: str, finder: _Terms | _Pattern, wanted: frozenset[str], lo: int = 0, hi: int | None = None
) -> Iterator[tuple[int, int]]:
    """Spans of the marked words of `flat` that begin in [lo, hi): wanted terms found by `finder`, checked as whole words.

    `haystack` is `flat` lowercased when that kept every offset (else `flat` itself,
    with a case-blind `_Pattern`): see `excerpt`. The common cases of `_word_start`
    (a match after a space, or inside a word) and of `_marked` (a plain word that is
    wanted) are decided inline: this loop runs for every match of every excerpt.
    """
    hi = len(flat) if hi is None else hi
    seen = -1
    word_match = WORD.match
    for at, stop in finder.spans(haystack, lo, min(len(flat), hi + MAX_WORD)):
        if at < seen:
            continue  # inside a word already judged
        if at == 0:
            start = 0
        else:
            before = flat[at - 1]
            if before.isascii() and before.isalnum():
                continue  # inside a word: `tma` in `setmaxnreg` (the word is judged where it or a form begins)
            start = _word_start(flat, at) if _word_char(before) else at
        token = word_match(flat, start)
        if token is None:
            continue
        end = token.end()
        if end < stop:
            continue
        seen = end
        if start >= hi:
            return
        if start >= lo:
            word = token.group(0)
            if _marked(word, wanted):
                yield start, end


def excerpt(text: str, wanted: set[str] | frozenset[str], width: int = 200) -> str:
    """An HTML-escaped window of `text` around the first matching word; whole matching words in <mark>.

    A word is marked when it, or one of its index forms, is one of the `wanted`
    terms, so `tma` never marks the inside of `setmaxnreg` and `cp.async.bulk`
    marks all of `cp.async.bulk.tensor.2d`. One pass over the matches: the first
    mark places the window, the marks after it up to the window's end are kept.
    """
    flat = " ".join(text.split())
    wanted = frozenset(w for w in wanted if w)
    spans: list[tuple[int, int]] = []
    start = 0
    end = min(len(flat), width)
    if wanted:
        lowered = flat.lower()
        exact_case = len(lowered) == len(flat)  # lowercasing kept every offset (not so for a few non-ASCII letters)
        haystack = lowered if exact_case else flat
        marks = _marks(flat, haystack, _Terms(wanted) if exact_case else _Pattern(wanted), wanted)
        first = next(marks, None)
        if first is not None:
            start = max(0, first[0] - width // 3)
            if start:  # begin at a word boundary
                space = flat.find(" ", start)
                start = space + 1 if 0 <= space < first[0] else start
            end = min(len(flat), start + width)
            spans.append(first)
            for span in marks:
                if span[0] >= end:
                    break
                spans.append(span)
    if end < len(flat):  # end at a word boundary, but never cut a marked word
        space = flat.rfind(" ", start, end)
        cut = space if space > start else end
        end = max([cut] + [e for s, e in spans if s < cut <= e])
    out = ["…"] if start > 0 else []
    pos = start
    for s, e in spans:
        if s < pos or s >= end:
            continue
        out.append(html.escape(flat[pos:s]))
        out.append("<mark>" + html.escape(flat[s:e]) + "</mark>")
        pos = e
    out.append(html.escape(flat[pos:end]))
    if end < len(flat):
        out.append("…")
    return "".join(out)


MARK = re.compile(r"</?mark>")


def plain(snippet: str) -> str:
    """An excerpt as plain text: marks dropped, entities decoded (for terminals and JSON consumers)."""
    return html.unescape(MARK.sub("", snippet))
