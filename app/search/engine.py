"""Full-text search: ranked top-k queries over the tantivy indexes that app/search/sync.py keeps, and the result cache.

Ranking: BM25 with field boosts (title and aliases > tags > headings > body),
each query word also matching up to `PREFIX_EXPANSIONS` indexed words it is a
prefix of (weighted lower). English filler words are dropped and a question of
three or more words needs most of them, not all (minimum should match). An
exact id, alias or title match comes first. When nothing matches, at most
`TYPO_TERMS` unknown words are corrected with tantivy's fuzzy (Levenshtein
automaton) queries over a word list, within a time budget; then any word may
match. Sections, excerpts and highlights are computed for the returned window
only; totals are tantivy's exact counts.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import tantivy

from app.schemas import SearchPublic, SearchResult, SectionRef
from app.search.sync import (
    ALL,
    PAGE_FIELDS,
    SECTION_FIELDS,
    TYPO_MIN,
    SyncedIndex,
    Variants,
    _Tantivy,
    _unpack_section,
    _Word,
    field_of,
)
from app.search.text import (
    MAX_WORD,
    arch_forms,
    excerpt,
    phrases,
    question_words,
    root,
    words as words_of,
)
from snippets.repository import ALIAS_BY_ID, ALIAS_NAMED, ALIAS_OWN

SECTION_SOURCE = {"heading": "headings", "text": "body"}
"""The page field whose term dictionary a section field's expansions come from."""
PREFIX_MIN = 3
"""Words at least this long also match the indexed words they begin (`synchroniz` → synchronization)."""
PREFIX_EXPANSIONS = 8
"""Indexed words, most frequent first, that one query word expands to per field."""
PREFIX_WEIGHT = 0.4
"""Weight of a prefix expansion against the word itself."""
ROOT_WEIGHT = 0.3
"""Weight of a word sharing the query word's root (`allocation` for `allocate`)."""
PHRASE_SCORE = 4.0
"""Score per word of a run of query words that is exactly a page's alias or title ("shared memory")."""
FAMILY_WEIGHT = 0.6
"""Weight of an architecture family (`sm90`) against the exact label (`sm90a`)."""
TYPO_TERMS = 4
"""Unknown words corrected at most per query."""
FACETS = ("type", "arch", "tag")
"""What a search can count its hits by, when asked (`facets=`); counting costs about as much as ranking."""
FACET_TAGS = 30
RUN_WORDS = 12
"""Query words (from the first) whose runs are compared with aliases and titles."""
WORD_CACHE = 4096
"""Query words whose expansions and page clause are kept for the current searcher (words repeat across queries)."""


def parse_facets(value: str) -> tuple[str, ...]:
    """`facets=type,tag` → ("type", "tag"); '' → (); ValueError naming what is not a facet."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in FACETS]
    if unknown:
        raise ValueError(f"facets: no facet {', '.join(repr(n) for n in unknown)}; allowed: {', '.join(FACETS)}")
    return tuple(dict.fromkeys(names))


def minimum_should_match(n: int) -> int:
    """Words a document must contain: all of one or two, then about two thirds (3 → 2, 4 → 3, 6 → 4)."""
    return n if n <= 2 else math.ceil(n * 2 / 3)


def hit_count(found: tantivy.SearchResult | None) -> int:
    """How many documents a search (with count=True) matched; none for no search."""
    if found is None:
        return 0
    return found.count  # type: ignore[attr-defined]  # tantivy's type stub leaves out SearchResult.count


@dataclass(frozen=True)
class Window:
    """What one search asked for, normalised: the result cache's key (with the index generation)."""

    query: str
    filters: tuple[tuple[str, str], ...]
    limit: int
    offset: int
    facets: tuple[str, ...]


class SearchEngine(SyncedIndex):
    """The process's full-text index and its search; thread-safe, rebuilt from SQL on demand."""

    # -- searching ---------------------------------------------------------------

    def search(
        self,
        query: str,
        filters: dict[str, str],
        params: dict[str, str],
        limit: int = 20,
        offset: int = 0,
        facets: tuple[str, ...] = (),
    ) -> SearchPublic:
        """Ranked, filtered page search, counted by the `facets` asked for (of FACETS); `filters` hold index values, `params` the caller's spelling."""
        started = time.perf_counter()
        facets = tuple(name for name in FACETS if name in facets)
        window = Window(" ".join(query.lower().split()), tuple(sorted(filters.items())), limit, offset, facets)
        key = (window, self.generation)
        cached = self._cache.get(key)
        if cached is not None:
            return cached.model_copy(update={"took_ms": round((time.perf_counter() - started) * 1000, 3)})
        answer = self._search(query, filters, params, limit, offset, facets)
        answer.took_ms = round((time.perf_counter() - started) * 1000, 3)
        self._cache.put(key, answer)
        return answer.model_copy()  # callers may set top-level fields (the API's `context`): never on the cached one

    def _search(
        self, query: str, filters: dict[str, str], params: dict[str, str], limit: int, offset: int, facets: tuple[str, ...]
    ) -> SearchPublic:
        pages = self.pages  # one generation throughout: a reindex may replace the attribute meanwhile
        searcher = pages.searcher
        schema = pages.schema
        must = self._filter_clauses(filters)
        words = question_words(query)
        did_you_mean = None
        read = {w: self._word(searcher, w) for w in words}
        runs = [r for r in phrases(words_of(query)[:RUN_WORDS]) if " " in r or r in read]
        page_query = self._page_query(words, read, must, minimum_should_match(len(words)), runs) if words else None
        found = searcher.search(page_query, limit=offset + limit + 1) if page_query is not None else None
        if words and hit_count(found) == 0:
            fixed = self._correct(searcher, words, read)
            fixed_read = read
            if fixed != words:
                fixed_read = {w: read.get(w) or self._word(searcher, w) for w in fixed}
                retry_query = self._page_query(fixed, fixed_read, must, minimum_should_match(len(fixed)), phrases(fixed))
                retry = searcher.search(retry_query, limit=offset + limit + 1)
                if hit_count(retry):
                    found, words, read, did_you_mean, page_query = retry, fixed, fixed_read, " ".join(fixed), retry_query
            if hit_count(found) == 0 and len(words) > 1:  # then any word may match (corrected ones where there were typos)
                loose_words, loose_read = (fixed, fixed_read) if fixed != words else (words, read)
                page_query = self._page_query(loose_words, loose_read, must, 1, runs)
                found = searcher.search(page_query, limit=offset + limit + 1)
                if hit_count(found) and loose_words != words:
                    words, read, did_you_mean = loose_words, loose_read, " ".join(loose_words)
        hits: list[tuple[float, Any]] = list(found.hits) if found is not None else []
        total = hit_count(found)
        exact = self._exact(searcher, schema, query, must)
        if exact is not None:
            listed = [i for i, (_, addr) in enumerate(hits) if _same(addr, exact)]
            if listed:
                hits.pop(listed[0])
            else:
                total += 1  # the name matched a page the words did not
            best = hits[0][0] if hits else 0.0
            hits.insert(0, (best + 1.0, exact))
        window = hits[offset : offset + limit]
        wanted = {term for w in words if w in read for terms in read[w].variants.values() for term, _ in terms}
        results = self._results(pages, window, words, read, wanted)
        next_q = None
        if offset + limit < total:
            asked = {"facets": ",".join(facets)} if facets else {}
            next_q = urlencode({"q": query, **params, **asked, "limit": limit, "offset": offset + limit})
        counts = self._facets(searcher, page_query if total and page_query is not None else None, exact, facets) if facets else {}
        return SearchPublic(
            query=query,
            total=total,
            limit=limit,
            offset=offset,
            next=next_q,
            results=results,
            facets=counts,
            did_you_mean=did_you_mean,
            took_ms=0.0,
        )

    def _filter_clauses(self, filters: dict[str, str]) -> list[Any]:
        schema = self.pages.schema
        clauses = []
        for name, value in filters.items():
            term = tantivy.Query.term_query(schema, name, value)
            if name == "language":  # a page for any language ('*') passes every language filter
                term = tantivy.Query.boolean_query(
                    [(tantivy.Occur.Should, term), (tantivy.Occur.Should, tantivy.Query.term_query(schema, name, "*"))]
                )
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(term, 0.0)))
        return clauses

    def _word(self, searcher: Any, word: str) -> _Word:
        """A query word as `searcher` reads it, from the cache kept for that searcher (any other searcher resets it)."""
        owner, known = self._words
        if owner is not searcher:
            known = {}
            self._words = (searcher, known)
        found = known.get(word)
        if found is None:
            variants = self._variants(searcher, word)
            found = _Word(variants, self._page_clause(variants), self._section_terms(variants))
            if len(known) < WORD_CACHE:
                known[word] = found
        return found

    def _variants(self, searcher: Any, word: str) -> Variants:
        """The indexed words one query word matches, with weights, per field (ALL: every field).

        The word itself and its architecture forms are asked of every field; its
        prefix and root expansions only of the field whose dictionary holds them.
        """
        found: Variants = {ALL: [(word, 1.0)]}
        forms = arch_forms(word)
        for form in forms:
            if form != word:
                found[ALL].append((form, 1.0 if form == forms[0] else FAMILY_WEIGHT))
        if len(word) >= PREFIX_MIN and not forms:
            stem = root(word) or word  # a prefix of the word: one walk finds the word's extensions and its relatives
            for name in PAGE_FIELDS:
                terms = [
                    (term, PREFIX_WEIGHT if term.startswith(word) else ROOT_WEIGHT)
                    for term, _n in searcher.terms_with_prefix(field_of(name, stem), stem, limit=PREFIX_EXPANSIONS + 1)
                    if term != word
                ]
                if terms:
                    found[name] = terms[:PREFIX_EXPANSIONS]
        return found

    def _page_clause(self, variants: Variants) -> Any:
        """A page matches one query word: a union of its terms over the page fields, each term weighted and boosted."""
        schema = self.pages.schema
        subs = [
            (
                tantivy.Occur.Should,
                tantivy.Query.boost_query(tantivy.Query.term_query(schema, field_of(name, term), term), boost * weight),
            )
            for name, boost in PAGE_FIELDS.items()
            for term, weight in variants[ALL] + variants.get(name, [])
        ]
        return tantivy.Query.boolean_query(subs)

    def _page_query(
        self, words: list[str], read: dict[str, _Word], must: list[Any], at_least: int, runs: list[str] | None = None
    ) -> Any:
        """Pages with at least `at_least` of the words; a run of query words that is a page's alias or title scores extra."""
        schema = self.pages.schema
        clauses = [(tantivy.Occur.Should, read[w].clause) for w in words]
        text = tantivy.Query.boolean_query(clauses, minimum_number_should_match=min(at_least, len(clauses)))
        bonus = [
            (
                tantivy.Occur.Should,
                tantivy.Query.const_score_query(
                    tantivy.Query.term_query(schema, field, run), PHRASE_SCORE * (run.count(" ") + 1)
                ),
            )
            for run in runs or []
            for field in ("alias_exact", "title_exact")
        ]
        if not must and not bonus:
            return text
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, text), *bonus, *must])

    def _exact(self, searcher: Any, schema: Any, query: str, must: list[Any]) -> Any:
        """The page whose id, alias or title is exactly the query (case-insensitive), if it passes the filters."""
        needle = query.strip().lower()
        if not needle or len(needle) > MAX_WORD:
            return None
        # One search, a page scored by its best match: an id match (in any case; as spelled first) outranks an alias
        # match, the strongest holder of the alias first (its own, then merged for a term it names, then for a term its
        # id names: snippets.repository ALIAS_OWN, …), which outranks a title match.
        names = tantivy.Query.disjunction_max_query(
            [
                tantivy.Query.const_score_query(tantivy.Query.term_query(schema, field, term), score)
                for field, term, score in (
                    ("id", query.strip(), 3.5),
                    ("id_exact", needle, 3.0),
                    *(("alias_rank", f"{rank}:{needle}", 2.0 - rank / 4) for rank in (ALIAS_OWN, ALIAS_NAMED, ALIAS_BY_ID)),
                    ("title_exact", needle, 1.0),
                )
            ]
        )
        found = searcher.search(tantivy.Query.boolean_query([(tantivy.Occur.Must, names), *must]), limit=1, count=False)
        return found.hits[0][1] if found.hits else None

    def _correct(self, searcher: Any, words: list[str], read: dict[str, _Word]) -> list[str]:
        """Unknown words replaced by the most common indexed word within their edit limit (bounded work)."""
        deadline = time.perf_counter() + self.typo_budget_s
        known_words = self.words.searcher  # one searcher for a search and its read (a reindex replaces the attribute)
        fixed = list(words)
        tried = 0
        for i, word in enumerate(words):
            if tried >= TYPO_TERMS or time.perf_counter() > deadline:
                break
            if len(word) < TYPO_MIN or not word.isalpha() or self._known(searcher, read[word].variants):
                continue
            tried += 1
            for distance in (1, 2) if len(word) > 7 else (1,):
                q = tantivy.Query.fuzzy_term_query(self.words.schema, "word", word, distance, True, False)
                found = known_words.search(q, limit=1, count=False, order_by_field="docs")
                if found.hits:
                    fixed[i] = known_words.doc(found.hits[0][1])["word"][0]
                    break
        return fixed

    def _known(self, searcher: Any, variants: Variants) -> bool:
        return (
            len(variants) > 1
            or len(variants[ALL]) > 1
            or any(searcher.doc_freq(field_of(name, variants[ALL][0][0]), variants[ALL][0][0]) for name in PAGE_FIELDS)
        )

    def _facets(self, searcher: Any, page_query: Any, exact: Any, names: tuple[str, ...]) -> dict[str, dict[str, int]]:
        """Hit counts per value of each facet in `names` (tantivy aggregations over fast fields)."""
        if page_query is None and exact is None:
            return {name: {} for name in names}
        if page_query is None:
            data = json.loads(bytes(searcher.doc(exact)["data"][0]))
            page_query = tantivy.Query.term_query(self.pages.schema, "id", data["id"])
        spec = {name: {"terms": {"field": name, "size": FACET_TAGS if name == "tag" else 100}} for name in names}
        found = searcher.aggregate(page_query, spec)
        return {name: {b["key"]: b["doc_count"] for b in found[name]["buckets"]} for name in spec}

    def _results(
        self, index: _Tantivy, window: list[tuple[float, Any]], words: list[str], read: dict[str, _Word], wanted: set[str]
    ) -> list[SearchResult]:
        if not window:
            return []
        addrs = [addr for _score, addr in window]
        numbers = index.searcher.fast_field_values("page_no", addrs)
        pages = [(score, index.data(addr, json.loads)) for score, addr in window]
        ids = {no: p["id"] for (_, p), no in zip(pages, numbers, strict=True) if isinstance(no, int)}
        best = self._best_sections(ids, words, read)
        out = []
        for score, page in pages:
            sec = best.get(page["id"]) or {"heading": page["title"], "anchor": "", "text": page["title"]}
            out.append(
                SearchResult(
                    id=page["id"],
                    title=page["title"],
                    type=page["type"],
                    path=page["path"],
                    architectures=list(page["architectures"]),
                    score=round(score, 4),
                    section=SectionRef(heading=sec["heading"], anchor=sec["anchor"]),
                    snippet=excerpt(sec["text"], wanted) or excerpt(page["title"], wanted),
                )
            )
        return out

    def _section_query(self, pages: Any, words: list[str], read: dict[str, _Word]) -> Any:
        """Sections of `pages` holding any of the words, scored as `_page_clause` scores pages, one clause per term.

        Each term is intersected with the pages on its own, and the clauses are
        summed: the same scores as the pages AND a union of the terms, without
        that union (tantivy seeks a union by scoring every match in a 4,096-document
        window: 0.47 ms a query at 10,000 pages against 0.14 ms for this form).
        """
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.boolean_query([(tantivy.Occur.Must, pages), (tantivy.Occur.Must, term)]))
            for w in words
            for term in read[w].section_terms
        ]
        return tantivy.Query.boolean_query(clauses)

    def _section_terms(self, variants: Variants) -> list[Any]:
        """One query word's terms in the section fields, each weighted and boosted (see `_section_query`)."""
        schema = self.sections.schema
        return [
            tantivy.Query.boost_query(tantivy.Query.term_query(schema, field_of(name, term), term), boost * weight)
            for name, boost in SECTION_FIELDS.items()
            for term, weight in variants[ALL] + variants.get(SECTION_SOURCE[name], [])
        ]

    def _best_sections(self, numbered: dict[int, str], words: list[str], read: dict[str, _Word]) -> dict[str, dict[str, str]]:
        """Each page's best-matching section, or its first section with text (`numbered`: page number → id)."""
        sections = self.sections  # one generation throughout: a reindex may replace the attribute meanwhile
        searcher = sections.searcher
        schema = sections.schema
        ids = list(numbered.values())
        pages = _any_of(schema, "page_id", ids)
        best: dict[str, dict[str, str]] = {}
        if words:
            found = searcher.search(self._section_query(pages, words, read), limit=len(ids) * 16, count=False)
            self._choose(sections, found, numbered, best)
        missing = {no: pid for no, pid in numbered.items() if pid not in best}
        if missing:
            lead = (tantivy.Occur.Must, tantivy.Query.term_query(schema, "lead", "1"))
            within = (
                tantivy.Occur.Must,
                pages if len(missing) == len(ids) else _any_of(schema, "page_id", list(missing.values())),
            )
            found = searcher.search(tantivy.Query.boolean_query([within, lead]), limit=len(missing), count=False)
            self._choose(sections, found, missing, best)
        return best

    def _choose(self, index: _Tantivy, found: Any, numbered: dict[int, str], best: dict[str, dict[str, str]]) -> None:
        """The first (best) hit of each page of `numbered` among sections `found` in `index`, into `best`.

        Page numbers stay with their pages across generations (app/search/sync.py), so the
        numbers read from the page searcher name the same pages in the section searcher.
        """
        addrs = [addr for _score, addr in found.hits]
        for addr, page_no in zip(addrs, index.searcher.fast_field_values("page_no", addrs), strict=True):
            pid = numbered.get(page_no) if isinstance(page_no, int) else None
            if pid is not None and pid not in best:
                best[pid] = index.data(addr, _unpack_section)


def _any_of(schema: Any, field: str, values: list[str]) -> Any:
    """Documents whose `field` is one of a few `values`, unscored.

    A union of term queries: for ten page ids at 10,000 pages it measured 0.03 ms
    against 0.26 ms for `term_set_query` (which builds an automaton over the values).
    """
    terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, field, v)) for v in values]
    return tantivy.Query.const_score_query(tantivy.Query.boolean_query(terms), 0.0)


def _same(a: Any, b: Any) -> bool:
    return a.segment_ord == b.segment_ord and a.doc == b.doc
