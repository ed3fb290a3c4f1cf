"""The tantivy indexes of the SQL index's pages, and keeping them in line with it (`SyncedIndex`).

The SQL index (SQLite or PostgreSQL) is the system of record; this module keeps
an in-memory tantivy index beside it, one per service process, so both database
backends answer identically by construction. `SearchEngine.sync` brings it in
line with the SQL index: it compares the index generation (one small query per
search) and, when that moved, each page's content hash, and re-adds only the
pages that changed. A fresh process builds it from the SQL rows at start.

Two tantivy indexes: one document per page (ranked, counted, filtered and
faceted by app/search/engine.py) and one per section (to name the best section of each returned
page and cut its excerpt). Each searched text is two fields: its plain words
(letters and digits, found by tantivy's simple tokenizer, `<field>`) and its
GPU identifiers as single terms with their suffixes and pieces
(`<field>_ids`, listed by `app.search.text.index_terms`); a query term is asked of
the one its shape belongs to (`app.search.text.plain_word`). Queries are built from
`tantivy.Query` objects, never parsed from user text.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import tantivy
from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.cache import LRU
from app.index.db import chunks, index_generation
from app.index.facets import FILTER_FACETS
from app.index.models import PageRow, SectionRow
from app.schemas import SearchPublic
from app.search.text import (
    MAX_WORD,
    arch_forms,
    fold,
    index_terms,
    plain_word,
)

PAGE_FIELDS = {"title": 10.0, "aliases": 10.0, "tags": 5.0, "headings": 3.0, "body": 1.0}
"""Searched page fields and their boosts: title and aliases above tags, tags above headings, headings above body."""
SECTION_FIELDS = {"heading": 3.0, "text": 1.0}
ALL = "*"
FILTER_FIELDS = ("type", "arch", "tag", "language", "confidence", *FILTER_FACETS)
"""Fields a search filters by (raw terms, lowercase but type and confidence); the facets' come from app.index.facets."""
TYPO_MIN = 5
"""Shortest word that gets a typo correction (one edit up to 7 letters, two beyond)."""
ANALYZER = "kw"
IDS_ANALYZER = "kw_ids"
IDS = "_ids"
"""Suffix of the field that holds a text's identifier terms (`body_ids` beside `body`)."""


Variants = dict[str, list[tuple[str, float]]]
"""Indexed words a query word matches, with their weights, per page field (ALL: asked of every field)."""


def analyzer() -> Any:
    """The tokenizer of a text's plain words: runs of letters and digits, lowercased, ASCII-folded, long words dropped.

    tantivy's simple tokenizer: 30 MB of section text took 0.5 s to index where
    a regex tokenizer of app.search.text's word pattern took 3.5 s (tantivy runs the
    regex once per token).
    """
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.remove_long(MAX_WORD + 1))
        .build()
    )


def identifier_analyzer() -> Any:
    """The tokenizer of a text's identifier terms, which `app.search.text.index_terms` lists space-separated and folded."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.remove_long(MAX_WORD + 1))
        .build()
    )


def field_of(name: str, term: str) -> str:
    """The field of a searched text (`name`) that holds `term`: `name` for a plain word, `name_ids` for an identifier."""
    return name if plain_word(term) else name + IDS


def _page_schema() -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", tokenizer_name="raw")
    for name in PAGE_FIELDS:
        sb.add_text_field(name, tokenizer_name=ANALYZER, index_option="freq")
        sb.add_text_field(name + IDS, tokenizer_name=IDS_ANALYZER, index_option="freq")
    for name in FILTER_FIELDS:
        sb.add_text_field(name, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_text_field("alias_exact", tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title_exact", tokenizer_name="raw", index_option="basic")
    sb.add_unsigned_field("page_no", fast=True)
    sb.add_bytes_field("data", stored=True)
    return sb.build()


def _section_schema() -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("page_id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("lead", tokenizer_name="raw", index_option="basic")
    sb.add_unsigned_field("page_no", fast=True)
    sb.add_unsigned_field("section_no", fast=True)
    for name in SECTION_FIELDS:
        sb.add_text_field(name, tokenizer_name=ANALYZER, index_option="freq")
        sb.add_text_field(name + IDS, tokenizer_name=IDS_ANALYZER, index_option="freq")
    sb.add_bytes_field("data", stored=True)
    return sb.build()


def _word_schema() -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("word", stored=True, tokenizer_name="raw")
    sb.add_unsigned_field("docs", fast=True)
    return sb.build()


WRITER_HEAP = 512_000_000
"""The writer's memory budget: an upper bound, taken as used (at 10,000 pages the whole process peaked at 191 MB)."""


class _Tantivy:
    """One in-memory tantivy index with its writer and current searcher.

    One indexing thread, so a build makes one segment (each indexing thread
    writes its own, and tantivy-py cannot merge them on request): a search
    then walks one term dictionary per term instead of two, which made every
    search step 15-25% cheaper at 10,000 pages (the build took 0.8 s longer
    with two threads' work on one).
    """

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.index = tantivy.Index(schema)
        self.index.register_tokenizer(ANALYZER, analyzer())
        self.index.register_tokenizer(IDS_ANALYZER, identifier_analyzer())
        self.writer = self.index.writer(heap_size=WRITER_HEAP, num_threads=1)
        self.searcher = self.index.searcher()

    def commit(self) -> None:
        self.writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def reset(self) -> None:
        self.writer.delete_all_documents()


@dataclass(frozen=True)
class _Word:
    """One query word as the current searcher reads it (kept in `SearchEngine._words`)."""

    variants: Variants  # the indexed words it matches (`SearchEngine._variants`); never changed once made
    clause: Any  # its clause of the page query (`SearchEngine._page_clause`)
    section_terms: list[Any]  # its terms in the section fields (`SearchEngine._section_terms`)


class SyncedIndex:
    """The process's tantivy indexes and the state searches read, kept in line with the SQL index; thread-safe.

    `SearchEngine` (app/search/engine.py) adds the searching.
    """

    def __init__(self, cache_size: int = 1024, typo_budget_s: float = 0.04, refresh_s: float = 0.0) -> None:
        self.cache_size = cache_size
        self.typo_budget_s = typo_budget_s
        self.refresh_s = refresh_s
        self._checked = -math.inf  # time.monotonic() of the last generation check
        self._writers = 0  # reindexes of this process under way (`writing`)
        self._writers_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cache: LRU[SearchPublic] = LRU(cache_size)  # answers, keyed with the generation they were made for
        self._hashes: dict[str, str] = {}
        self._page_no: dict[str, int] = {}  # page id → its number (a fast field of the page and of its sections)
        # What a result shows of a page and of a section, by number, in memory: reading it from tantivy's compressed
        # store cost ~10 us a document, 20 documents a search. A search holding an older searcher may meet a number
        # already dropped here; it then reads the store (`_page_of`, `_choose`).
        self._page_data: dict[int, dict[str, Any]] = {}
        self._section_data: dict[int, bytes] = {}  # section number → `_pack_section` data
        self._sections_of: dict[int, list[int]] = {}  # page number → its section numbers
        self._next_section = 0
        self._words: tuple[Any, dict[str, _Word]] = (None, {})  # (the searcher they were read from, word → `_Word`)
        self.generation: int | None = None
        self.pages = _Tantivy(_page_schema())
        self.sections = _Tantivy(_section_schema())
        self.words = _Tantivy(_word_schema())
        self.values: dict[str, list[str]] = {name: [] for name in FILTER_FIELDS}
        """The values each filter field holds in the index (for 422 answers that list them)."""

    # -- keeping in line with the SQL index -----------------------------------------

    def due(self) -> bool:
        """Whether a search should ask the database for the generation first (at most every `refresh_s`).

        A reindex made by this process syncs at once; one made by another process
        (a CLI `kernelwiki index`, the supervisor of `serve --workers`) is seen
        within `refresh_s`, like a search engine's refresh interval. While this
        process reindexes, every search asks (its SQL commit may land at any time).
        """
        return self._writers > 0 or time.monotonic() - self._checked >= self.refresh_s

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around a reindex of this process: searches ask for the generation until it is over (see `due`)."""
        with self._writers_lock:
            self._writers += 1
        try:
            yield
        finally:
            with self._writers_lock:
                self._writers -= 1

    def sync(self, conn: Connection) -> None:
        """Bring the index in line with the SQL index behind `conn` (cheap when the generation did not move)."""
        generation = index_generation(conn) or 0
        self._checked = time.monotonic()
        if generation == self.generation:
            return
        with self._lock:
            if generation == self.generation:
                return
            # A page's content hash and path: a page is re-added when either changed.
            current = {
                pid: f"{h}\0{path}"
                for pid, h, path in conn.execute(select(col(PageRow.id), col(PageRow.content_hash), col(PageRow.path)))
            }
            changed = sorted(pid for pid, h in current.items() if self._hashes.get(pid) != h)
            removed = sorted(pid for pid in self._hashes if pid not in current)
            if changed or removed:
                rebuild = len(changed) + len(removed) > len(current) // 2
                self._apply(conn, sorted(current) if rebuild else changed, removed, rebuild)
                self._hashes = current
            self.generation = generation
            self._cache.clear()

    def _apply(self, conn: Connection, changed: list[str], removed: list[str], rebuild: bool) -> None:
        replaced = list(self._sections_of) if rebuild else [self._page_no[p] for p in changed + removed if p in self._page_no]
        stale = [n for page_no in replaced for n in self._sections_of.pop(page_no, [])]
        if rebuild:
            self.pages.reset()
            self.sections.reset()
        else:
            for pid in changed + removed:
                self.pages.writer.delete_documents_by_term("id", pid)
                self.sections.writer.delete_documents_by_term("page_id", pid)
        for chunk in chunks(changed, 500):
            sections: dict[str, list[Any]] = {}
            for row in conn.execute(
                select(
                    col(SectionRow.page_id),
                    col(SectionRow.position),
                    col(SectionRow.heading),
                    col(SectionRow.anchor),
                    col(SectionRow.text),
                )
                .where(col(SectionRow.page_id).in_(chunk))
                .order_by(col(SectionRow.page_id), col(SectionRow.position))
            ):
                sections.setdefault(row.page_id, []).append(row)
            for page in conn.execute(
                select(
                    col(PageRow.id),
                    col(PageRow.title),
                    col(PageRow.type),
                    col(PageRow.path),
                    col(PageRow.confidence),
                    col(PageRow.meta),
                ).where(col(PageRow.id).in_(chunk))
            ):
                self._add_page(page, sections.get(page.id, []))
        self.pages.commit()
        self.sections.commit()
        for n in stale:  # only now: searches holding the previous searcher found them until the commit
            self._section_data.pop(n, None)
        for pid in removed:
            self._page_data.pop(self._page_no[pid], None)
        self._refresh_words()

    def _add_page(self, row: Any, sections: list[Any]) -> None:
        meta = json.loads(row.meta)
        aliases = [str(a) for a in meta.get("aliases") or []]
        tags = [str(t) for t in meta.get("tags") or []]
        archs = [str(a) for a in meta.get("architectures") or []]
        languages = [str(lang) for lang in meta.get("languages") or []]
        number = self._page_no.setdefault(row.id, len(self._page_no))
        doc = tantivy.Document()
        doc.add_text("id", row.id)
        _add_searched(doc, "title", f"{row.title} {row.id}")
        _add_searched(doc, "aliases", "\n".join(aliases))
        _add_searched(doc, "tags", " ".join(tags + archs))
        texts: list[tuple[str, str]] = []
        headings: list[tuple[str, str]] = []
        lead_done = False
        numbers = self._sections_of[number] = []
        for sec in sections:
            s = self._section_doc(row.id, number, numbers)
            lead = not lead_done and bool(sec.text.strip() or sec.heading.strip())
            lead_done = lead_done or lead
            s.add_text("lead", "1" if lead else "0")
            headings.append(_add_searched(s, "heading", sec.heading))
            texts.append(_add_searched(s, "text", sec.text))
            self._store_section(s, numbers[-1], sec.heading or row.title, sec.anchor, sec.text or sec.heading or row.title)
        if not lead_done:  # a page without text still answers with a section: its title
            s = self._section_doc(row.id, number, numbers)
            s.add_text("lead", "1")
            self._store_section(s, numbers[-1], row.title, "", row.title)
        _add_terms(doc, "headings", headings)
        _add_terms(doc, "body", texts)
        doc.add_text("type", row.type)
        for fam in dict.fromkeys(_family(a) for a in archs):
            doc.add_text("arch", fam)
        for tag in dict.fromkeys(t.lower() for t in tags):
            doc.add_text("tag", tag)
        for lang in dict.fromkeys(lang.lower() for lang in languages):
            doc.add_text("language", lang)
        if row.confidence:
            doc.add_text("confidence", row.confidence)
        for name, field in FILTER_FACETS.items():
            values = meta.get(field)
            for value in dict.fromkeys(
                str(v).lower() for v in (values if isinstance(values, list) else [values]) if isinstance(v, (str, int, float))
            ):
                doc.add_text(name, value)
        for alias in dict.fromkeys(a.strip().lower() for a in aliases):
            doc.add_text("alias_exact", alias)
        doc.add_text("title_exact", row.title.strip().lower())
        data = {"id": row.id, "title": row.title, "type": row.type, "path": row.path, "architectures": archs}
        doc.add_unsigned("page_no", number)
        doc.add_bytes("data", json.dumps(data).encode())
        self._page_data[number] = data
        self.pages.writer.add_document(doc)

    def _section_doc(self, page_id: str, page_no: int, numbers: list[int]) -> Any:
        """A new section document of a page, numbered (the number appended to `numbers`)."""
        s = tantivy.Document()
        s.add_text("page_id", page_id)
        s.add_unsigned("page_no", page_no)
        s.add_unsigned("section_no", self._next_section)
        numbers.append(self._next_section)
        self._next_section += 1
        return s

    def _store_section(self, doc: Any, number: int, heading: str, anchor: str, text: str) -> None:
        data = _pack_section(heading, anchor, text)
        doc.add_bytes("data", data)
        self._section_data[number] = data
        self.sections.writer.add_document(doc)

    def _refresh_words(self) -> None:
        """The word list typo correction searches: every alphabetic word of the index with its page count."""
        counts: dict[str, int] = {}
        searcher = self.pages.searcher
        for name in PAGE_FIELDS:
            for word, n in searcher.terms_with_prefix(name, ""):
                if len(word) >= TYPO_MIN - 1 and word.isalpha():
                    counts[word] = max(n, counts.get(word, 0))
        self.words.reset()
        for word, n in counts.items():
            doc = tantivy.Document()
            doc.add_text("word", word)
            doc.add_unsigned("docs", n)
            self.words.writer.add_document(doc)
        self.words.commit()
        values = searcher.aggregate(
            tantivy.Query.all_query(), {name: {"terms": {"field": name, "size": 10_000}} for name in FILTER_FIELDS}
        )
        self.values = {name: sorted(b["key"] for b in values[name]["buckets"]) for name in FILTER_FIELDS}


def _add_searched(doc: Any, name: str, text: str) -> tuple[str, str]:
    """Index `text` as the searched text `name` of `doc` (its plain words, then its identifiers); returns what was added."""
    plain, identifiers = index_terms(text)
    words = f"{text}\n{plain}" if plain else text
    doc.add_text(name, words)
    if identifiers:
        doc.add_text(name + IDS, identifiers)
    return words, identifiers


def _add_terms(doc: Any, name: str, parts: list[tuple[str, str]]) -> None:
    """Index several texts already split by `_add_searched` as one searched text `name` (a page's body from its sections)."""
    doc.add_text(name, "\n".join(words for words, _ids in parts))
    identifiers = " ".join(ids for _words, ids in parts if ids)
    if identifiers:
        doc.add_text(name + IDS, identifiers)


SECTION_SEPARATOR = "\0"


def _pack_section(heading: str, anchor: str, text: str) -> bytes:
    """A section's stored data: heading, anchor and text joined by NUL (a NUL inside one reads as U+FFFD).

    Written 60,000 times for 10,000 pages: several times cheaper than JSON.
    """
    return SECTION_SEPARATOR.join(f.replace(SECTION_SEPARATOR, "\ufffd") for f in (heading, anchor, text)).encode()


def _unpack_section(data: bytes) -> dict[str, str]:
    heading, anchor, text = bytes(data).decode().split(SECTION_SEPARATOR)
    return {"heading": heading, "anchor": anchor, "text": text}


def _family(arch: str) -> str:
    forms = arch_forms(fold(arch).replace("-", ""))
    return forms[-1] if forms else fold(arch)
