"""The host's tantivy indexes of the SQL index's pages, and keeping them in line with it (`SyncedIndex`).

The SQL index (SQLite or PostgreSQL) is the system of record; this module keeps
a tantivy index of it on disk, one per host and database (generation folders,
app/search/folder.py), built once and memory-mapped read-only by every serving
process, so both database backends answer identically by construction.
`SearchEngine.sync` brings a process in line with the SQL index: it compares
the index generation (one small query per search, at most every `refresh_s`)
and, when that moved, opens the generation folder published for it, or builds
one from the previous folder, re-adding only the pages whose content hash or
path changed, and publishes it for the other processes. A generation is built
for one basis (`basis`): the documents' format here (`FORMAT`) and what the SQL
rows were made from besides the files (the data files and the rows version,
`app.index.db.rows_basis`); when either moved, every page was reparsed with the
same content hashes, so the generation is built anew rather than reused.

Two tantivy indexes: one document per page (ranked, counted, filtered and
faceted by app/search/engine.py) and one per section (to name the best section of each returned
page and cut its excerpt), and a word list for typo correction. Each searched text is two fields: its plain words
(letters and digits, found by tantivy's simple tokenizer, `<field>`) and its
GPU identifiers as single terms with their suffixes and pieces
(`<field>_ids`, listed by `app.search.text.index_terms`); a query term is asked of
the one its shape belongs to (`app.search.text.plain_word`). Queries are built from
`tantivy.Query` objects, never parsed from user text.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import tantivy
from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.cache import LRU
from app.index.db import chunks, index_generation, rows_basis
from app.index.facets import FILTER_FACETS
from app.index.filters import normalize_arch
from app.index.models import AliasRow, PageRow, SectionRow
from app.schemas import SearchPublic
from app.search.folder import DIGEST, INDEXES, STATE, HostFolder, Pointer
from app.search.text import (
    MAX_WORD,
    forget_terms,
    index_terms,
    plain_word,
)

FORMAT = 3
"""The version of the documents a generation holds (their fields and what goes into them): bump it when that changes,
and every host's index is built anew on its next sync (part of `basis`)."""
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
    sb.add_text_field("id", tokenizer_name="raw")  # as written: what a page's documents are deleted by
    sb.add_text_field("id_exact", tokenizer_name="raw", index_option="basic")  # lowercased, as a query is asked
    for name in PAGE_FIELDS:
        sb.add_text_field(name, tokenizer_name=ANALYZER, index_option="freq")
        sb.add_text_field(name + IDS, tokenizer_name=IDS_ANALYZER, index_option="freq")
    for name in FILTER_FIELDS:
        sb.add_text_field(name, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_text_field("alias_exact", tokenizer_name="raw", index_option="basic")
    sb.add_text_field("alias_rank", tokenizer_name="raw", index_option="basic")  # `rank:alias`: how the page holds it
    sb.add_text_field("title_exact", tokenizer_name="raw", index_option="basic")
    sb.add_unsigned_field("page_no", fast=True)
    sb.add_bytes_field("data", stored=True)
    return sb.build()


def _section_schema() -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("page_id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("lead", tokenizer_name="raw", index_option="basic")
    sb.add_unsigned_field("page_no", fast=True)
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


SCHEMAS = {"pages": _page_schema, "sections": _section_schema, "words": _word_schema}
STORED = {"pages": 10_000, "sections": 8_192, "words": 0}
"""Documents whose stored data (`data`) a process keeps per generation, per index (see `_Tantivy.data`)."""
WRITER_HEAP = 512_000_000
"""The writer's memory budget: an upper bound, taken as used (at 10,000 pages the whole process peaked at 191 MB)."""


class _Tantivy:
    """One tantivy index (in memory, or a generation's folder opened for reading) and its current searcher."""

    def __init__(self, index: Any, stored: int = 0) -> None:
        self.index = index
        self.index.register_tokenizer(ANALYZER, analyzer())
        self.index.register_tokenizer(IDS_ANALYZER, identifier_analyzer())
        self.schema = index.schema
        self.searcher = index.searcher()
        self._stored: LRU[bytes] = LRU(stored)

    @classmethod
    def empty(cls, name: str) -> _Tantivy:
        """An empty in-memory index: what a process searches before its first sync."""
        return cls(tantivy.Index(SCHEMAS[name]()))

    @classmethod
    def open(cls, path: Path) -> _Tantivy:
        """A published generation's index, read-only: memory-mapped, shared with every process that opens it."""
        index = tantivy.Index.open(str(path))
        index.config_reader("Manual", 0)  # a published generation never changes: no watcher thread
        return cls(index, STORED.get(path.name, 0))

    def data(self, addr: Any, decode: Callable[[bytes], Any]) -> Any:
        """The document at `addr`'s stored `data`, decoded; its bytes kept for this generation (at most `STORED`).

        Reading it from tantivy's store decompresses a block of documents each time: with the decoding
        that was 7% of a search's CPU at 10,000 pages, where the per-process dictionaries of the
        in-memory index (undone by the on-disk one) cost nothing. The bytes are kept, not the decoded
        value: a page's dictionary or a section's three strings took ~2.5x the memory of their bytes
        (the caches, full, held ~16 MB in every worker), and decoding them again is a few microseconds.
        Kept per `_Tantivy`, so per generation: a reindex opens new ones, and a search still reading the
        old one reads its own.
        """
        key = (addr.segment_ord, addr.doc)
        found = self._stored.get(key)
        if found is None:
            found = bytes(self.searcher.doc(addr)["data"][0])
            self._stored.put(key, found)
        return decode(found)


class _Writer:
    """A tantivy index being written in a new generation folder.

    One indexing thread, so a build makes one segment (each indexing thread
    writes its own, and tantivy-py cannot merge them on request): a search
    then walks one term dictionary per term instead of two, which made every
    search step 15-25% cheaper at 10,000 pages (the build took 0.8 s longer
    with two threads' work on one).
    """

    def __init__(self, path: Path, name: str, reuse: bool) -> None:
        self.index = tantivy.Index(SCHEMAS[name](), path=str(path), reuse=reuse)
        self.index.register_tokenizer(ANALYZER, analyzer())
        self.index.register_tokenizer(IDS_ANALYZER, identifier_analyzer())
        self.writer = self.index.writer(heap_size=WRITER_HEAP, num_threads=1)

    def finish(self) -> Any:
        """Commit, let merges end (nothing may change the folder once published); returns a searcher of the result."""
        self.writer.commit()
        self.writer.wait_merging_threads()
        self.index.reload()
        return self.index.searcher()


@dataclass(frozen=True)
class _Word:
    """One query word as the current searcher reads it (kept in `SearchEngine._words`)."""

    variants: Variants  # the indexed words it matches (`SearchEngine._variants`); never changed once made
    clause: Any  # its clause of the page query (`SearchEngine._page_clause`)
    section_terms: list[Any]  # its terms in the section fields (`SearchEngine._section_terms`)


class SyncedIndex:
    """The host's full-text index of the SQL index as this process reads it, kept in line with it; thread-safe.

    `directory`: the host folder of generations (app/search/folder.py), shared by
    every process serving the same database; None: a private temporary one.
    `SearchEngine` (app/search/engine.py) adds the searching.
    """

    def __init__(
        self, cache_size: int = 1024, typo_budget_s: float = 0.04, refresh_s: float = 0.0, directory: Path | None = None
    ) -> None:
        self.cache_size = cache_size
        self.typo_budget_s = typo_budget_s
        self.refresh_s = refresh_s
        self.directory = directory
        self._checked = -math.inf  # time.monotonic() of the last generation check
        self._writers = 0  # reindexes of this process under way (`writing`)
        self._writers_lock = threading.Lock()
        self._lock = threading.RLock()  # re-entrant: `writing` holds it around a reindex whose own `sync` takes it again
        self._host_held = False  # whether this process holds the host lock (`writing`; read only under `_lock`)
        self._cache: LRU[SearchPublic] = LRU(cache_size)  # answers, keyed with the generation they were made for
        self._held: list[IO[str]] = []  # the shared lock on the generation folder open here (`HostFolder.hold`)
        weakref.finalize(self, _release, self._held)  # let go of it with the engine
        self._folder: str | None = None  # its name
        self._words: tuple[Any, dict[str, _Word]] = (None, {})  # (the searcher they were read from, word → `_Word`)
        self._flight: Future[None] | None = None  # the sync `sync_in_background` started last
        self._flight_lock = threading.Lock()
        self.generation: int | None = None
        self.pages = _Tantivy.empty("pages")
        self.sections = _Tantivy.empty("sections")
        self.words = _Tantivy.empty("words")
        self.values: dict[str, list[str]] = {name: [] for name in FILTER_FIELDS}
        """The values each filter field holds in the index (for 422 answers that list them)."""

    def host_folder(self) -> HostFolder:
        """The host folder of generations (a private temporary one, made on first use, when none was given)."""
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="kernelwiki-search-"))
            weakref.finalize(self, shutil.rmtree, self.directory, True)
        return HostFolder(self.directory)

    # -- keeping in line with the SQL index -----------------------------------------

    def due(self) -> bool:
        """Whether a search should ask the database for the generation first (at most every `refresh_s`).

        A reindex made by this process syncs at once; one made by another process
        (a CLI `kernelwiki index`, the supervisor of `serve --workers`) is seen
        within `refresh_s`, like a search engine's refresh interval. While this
        process reindexes, every search asks (its SQL commit may land at any time), and so does every search until a
        generation is open: a fresh worker's warm-up may be syncing for the first time (`_checked` set, nothing open
        yet), and a search that skipped the sync then answered from the empty index (total 0).
        """
        return self.generation is None or self._writers > 0 or time.monotonic() - self._checked >= self.refresh_s

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around a reindex of this process: searches ask for the generation until it is over (see `due`), and this
        process holds the host lock from before its SQL commit until its own `sync` has published the generation.

        So the process that indexes builds what it indexed: a serving process whose first search came in between the
        commit and that sync would otherwise take the host lock first and build the generation itself (~50 s at
        100,000 pages under `serve --workers N`, after which that worker held ~60 MB more than the others for good,
        docs/benchmarks.md); it now waits for the lock, then opens the published generation. This process's own
        searches meanwhile search the generation open until the commit, then wait for the sync (as before). The
        order of the two locks is `sync`'s: this engine's, then the host's.
        """
        with self._writers_lock:
            self._writers += 1
        try:
            with self._lock:
                if self._host_held:  # a reindex within a reindex of this thread: the host lock is held already
                    yield
                    return
                with self.host_folder().locked():
                    self._host_held = True
                    try:
                        yield
                    finally:
                        self._host_held = False
        finally:
            with self._writers_lock:
                self._writers -= 1

    def sync(self, conn: Connection) -> None:
        """Read the host's generation of the SQL index behind `conn`, building it first if no process has.

        Cheap when the generation did not move. When it moved: open the published
        generation folder for it, or (under the host lock) build it from the
        previous one, changed pages only, and publish it. A process's first sync
        also checks the published folder against the SQL rows (the database may
        have been made anew since). While one thread syncs, the others keep
        searching the generation open (no search waits on another's catch-up),
        except during this process's own reindex (`writing`), when they wait.
        """
        generation = index_generation(conn) or 0
        self._checked = time.monotonic()
        if generation == self.generation:
            return
        if not self._lock.acquire(blocking=self.generation is None or self._writers > 0):
            return  # another thread is catching up: search what is open meanwhile
        try:
            if generation == self.generation:
                return
            folder = self.host_folder()
            pointer = folder.pointer()
            if pointer is not None and pointer.generation == generation and self.generation is not None:
                if self._open(folder, pointer):
                    return
            with nullcontext() if self._host_held else folder.locked():  # held by `writing` already
                pointer = folder.pointer()
                if pointer is None or pointer.generation != generation or self.generation is None:
                    pointer = self._publish(conn, folder, generation, pointer)
                if not self._open(folder, pointer):
                    raise RuntimeError(f"full-text index generation {pointer.folder} in {folder.root} is incomplete")
                folder.clean(keep=pointer.folder)
        finally:
            self._lock.release()

    def sync_in_background(self, connect: Callable[[], AbstractContextManager[Connection]]) -> Future[None]:
        """`sync` on a connection of its own (`connect()`) in a thread of its own; one at a time: a caller that comes
        while one runs gets that one's future.

        For callers that must not wait on the sync itself (an event loop): the first sync of a process may build
        the host's index (~40-60 s at 100,000 pages), and the lock `sync` takes waits for a reindex's. A daemon
        thread, so a process stopping mid-build does not wait for it.
        """
        with self._flight_lock:
            if self._flight is not None and not self._flight.done():
                return self._flight
            flight: Future[None] = Future()
            flight.set_running_or_notify_cancel()  # running: a caller giving up cannot cancel it under the thread

            def run() -> None:
                try:
                    with connect() as conn:
                        self.sync(conn)
                except BaseException as exc:  # handed to whoever waits on it
                    flight.set_exception(exc)
                else:
                    flight.set_result(None)

            threading.Thread(target=run, name="kernelwiki-search-sync", daemon=True).start()
            self._flight = flight
            return flight

    def _open(self, folder: HostFolder, pointer: Pointer) -> bool:
        """Search the generation `pointer` names from now on; False when it was removed meanwhile."""
        if pointer.folder != self._folder:
            held = folder.hold(pointer.folder)
            if held is None:
                return False
            path = folder.root / pointer.folder
            pages, sections, words = (_Tantivy.open(path / name) for name in INDEXES)
            values = pages.searcher.aggregate(
                tantivy.Query.all_query(), {name: {"terms": {"field": name, "size": 10_000}} for name in FILTER_FIELDS}
            )
            self.pages, self.sections, self.words = pages, sections, words
            self.values = {name: sorted(b["key"] for b in values[name]["buckets"]) for name in FILTER_FIELDS}
            previous, self._held[:], self._folder = list(self._held), [held], pointer.folder
            _release(previous)  # searches still holding its searchers keep its memory maps
        self.generation = pointer.generation
        self._cache.clear()
        return True

    def _publish(self, conn: Connection, folder: HostFolder, generation: int, base: Pointer | None) -> Pointer:
        """The generation for the SQL rows behind `conn`: the published one if it holds them, else a new one built.

        Whether the published one holds them is first asked of its digest (`pages_digest`, the rows streamed, never
        held): a serving process opening the host's index reads no page table. Every page's hash and the previous
        generation's table (`state.json`) are read only to build: at 30,000 pages reading both kept ~18 MB of a
        worker's heap (freed to the allocator, not to the system), for nothing when the folder was current.
        """
        made_for = basis(conn)
        if base is not None and folder.digest(base.folder) == pages_digest(conn, made_for):
            folder.publish(Pointer(base.folder, generation))
            return Pointer(base.folder, generation)
        # A page's content hash and path: a page is re-added when either changed.
        current = {
            pid: f"{h}\0{path}"
            for pid, h, path in conn.execute(select(col(PageRow.id), col(PageRow.content_hash), col(PageRow.path)))
        }
        state = folder.state(base.folder) if base is not None else None
        if state is not None and state.get("basis") != made_for:
            state = None  # every page was made anew (or is written otherwise here): nothing of that generation is kept
        if base is not None and state is not None and state["hashes"] == current:
            pointer = Pointer(base.folder, generation)
            _write_digest(folder.root / base.folder, current, made_for)  # a folder of a version without digests: from now on
        else:
            hashes: dict[str, str] = state["hashes"] if state is not None else {}
            numbers: dict[str, int] = state["page_no"] if state is not None else {}
            changed = sorted(pid for pid, h in current.items() if hashes.get(pid) != h)
            removed = sorted(pid for pid in hashes if pid not in current)
            rebuild = base is None or state is None or len(changed) + len(removed) > len(current) // 2
            path = folder.new_folder(generation, None if rebuild or base is None else base.folder)
            self._build(conn, path, sorted(current) if rebuild else changed, [] if rebuild else removed, rebuild, numbers)
            for pid in removed:
                numbers.pop(pid, None)
            state_text = json.dumps({"generation": generation, "basis": made_for, "hashes": current, "page_no": numbers})
            _write_digest(path, current, made_for)
            (path / STATE).write_text(state_text)  # last: its presence means the folder is complete
            pointer = Pointer(path.name, generation)
        folder.publish(pointer)
        return pointer

    def _build(
        self, conn: Connection, path: Path, changed: list[str], removed: list[str], rebuild: bool, numbers: dict[str, int]
    ) -> None:
        """Write a generation into `path` (hard links to the previous one unless `rebuild`); `numbers` gains new pages'."""
        pages = _Writer(path / "pages", "pages", reuse=not rebuild)
        sections = _Writer(path / "sections", "sections", reuse=not rebuild)
        for pid in changed + removed:
            if not rebuild:
                pages.writer.delete_documents_by_term("id", pid)
                sections.writer.delete_documents_by_term("page_id", pid)
        next_no = max(numbers.values(), default=-1) + 1  # numbers stay with their pages across generations
        for chunk in chunks(changed, 500):
            found: dict[str, list[Any]] = {}
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
                found.setdefault(row.page_id, []).append(row)
            held: dict[str, list[tuple[str, int]]] = {}
            for alias in conn.execute(
                select(col(AliasRow.page_id), col(AliasRow.alias), col(AliasRow.rank))
                .where(col(AliasRow.page_id).in_(chunk))
                .order_by(col(AliasRow.page_id), col(AliasRow.id))
            ):
                held.setdefault(alias.page_id, []).append((alias.alias, alias.rank))
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
                if page.id not in numbers:
                    numbers[page.id] = next_no
                    next_no += 1
                _add_page(pages.writer, sections.writer, numbers[page.id], page, found.get(page.id, []), held.get(page.id, []))
        forget_terms()
        searcher = pages.finish()
        sections.finish()
        _write_words(path / "words", searcher)


def basis(conn: Connection) -> str:
    """What a generation for the SQL index behind `conn` is made for besides its pages' files: `FORMAT` and the rows'
    basis (`app.index.db.rows_basis`: the data files and the rows version)."""
    return f"{FORMAT}/{rows_basis(conn)}"


def pages_digest(conn: Connection, made_for: str | None = None) -> str:
    """A digest of every page's id, content hash and path in the SQL index behind `conn`, streamed (no row is kept),
    and of the `basis` (`made_for`, read from `conn` when not given)."""
    made_for = basis(conn) if made_for is None else made_for
    query = select(col(PageRow.id), col(PageRow.content_hash), col(PageRow.path))
    # The option for this statement only: `conn.execution_options(...)` would change `conn` itself (SQLAlchemy 2).
    rows = conn.execute(query, execution_options={"yield_per": 2000})
    return _digest(rows, made_for)


def _write_digest(path: Path, current: dict[str, str], made_for: str) -> None:
    """Write the digest of the pages `current` (id → content hash NUL path) for `made_for` into the generation folder `path`."""
    (path / DIGEST).write_text(_digest(((pid, *h.split("\0", 1)) for pid, h in current.items()), made_for))


def _digest(rows: Iterable[Sequence[str]], made_for: str) -> str:
    """The count and the sum of the rows' hashes (id, content hash, path), so their order does not matter, and the basis."""
    total = count = 0
    for pid, content_hash, path in rows:
        row = f"{pid}\0{content_hash}\0{path}".encode()
        total += int.from_bytes(hashlib.blake2b(row, digest_size=16).digest(), "big")
        count += 1
    return f"{count}:{total % (1 << 128):032x}:{made_for}"


def _release(held: list[IO[str]]) -> None:
    """Close the generation locks in `held` (the folders may then be removed by the next publish)."""
    for handle in held:
        handle.close()


def _add_page(pages: Any, sections: Any, number: int, row: Any, rows: list[Any], held: list[tuple[str, int]]) -> None:
    """One page's document and its sections' documents, added to the writers `pages` and `sections`.

    `rows` are its sections, `held` its aliases with how it holds each (the alias table's rows, in order)."""
    meta = json.loads(row.meta)
    aliases = [alias for alias, _rank in held]
    tags = [str(t) for t in meta.get("tags") or []]
    archs = [str(a) for a in meta.get("architectures") or []]
    languages = [str(lang) for lang in meta.get("languages") or []]
    doc = tantivy.Document()
    doc.add_text("id", row.id)
    doc.add_text("id_exact", row.id.lower())
    _add_searched(doc, "title", f"{row.title} {row.id}")
    _add_searched(doc, "aliases", "\n".join(aliases))
    _add_searched(doc, "tags", " ".join(tags + archs))
    texts: list[tuple[str, str]] = []
    headings: list[tuple[str, str]] = []
    lead_done = False
    for sec in rows:
        s = _section_doc(row.id, number)
        lead = not lead_done and bool(sec.text.strip() or sec.heading.strip())
        lead_done = lead_done or lead
        s.add_text("lead", "1" if lead else "0")
        headings.append(_add_searched(s, "heading", sec.heading))
        texts.append(_add_searched(s, "text", sec.text))
        s.add_bytes("data", _pack_section(sec.heading or row.title, sec.anchor, sec.text or sec.heading or row.title))
        sections.add_document(s)
    if not lead_done:  # a page without text still answers with a section: its title
        s = _section_doc(row.id, number)
        s.add_text("lead", "1")
        s.add_bytes("data", _pack_section(row.title, "", row.title))
        sections.add_document(s)
    _add_terms(doc, "headings", headings)
    _add_terms(doc, "body", texts)
    doc.add_text("type", row.type)
    for fam in dict.fromkeys(normalize_arch(a) for a in archs):  # as the arch filter asks (sm90a ≡ sm90; blackwell)
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
    for ranked in dict.fromkeys(f"{rank}:{alias.strip().lower()}" for alias, rank in held):
        doc.add_text("alias_rank", ranked)
    doc.add_text("title_exact", row.title.strip().lower())
    data = {"id": row.id, "title": row.title, "type": row.type, "path": row.path, "architectures": archs}
    doc.add_unsigned("page_no", number)
    doc.add_bytes("data", json.dumps(data).encode())
    pages.add_document(doc)


def _section_doc(page_id: str, page_no: int) -> Any:
    s = tantivy.Document()
    s.add_text("page_id", page_id)
    s.add_unsigned("page_no", page_no)
    return s


def _write_words(path: Path, pages: Any) -> None:
    """The word list typo correction searches: every alphabetic word of the pages' index with its page count."""
    counts: dict[str, int] = {}
    for name in PAGE_FIELDS:
        for word, n in pages.terms_with_prefix(name, ""):
            if len(word) >= TYPO_MIN - 1 and word.isalpha():
                counts[word] = max(n, counts.get(word, 0))
    words = _Writer(path, "words", reuse=False)
    for word, n in counts.items():
        doc = tantivy.Document()
        doc.add_text("word", word)
        doc.add_unsigned("docs", n)
        words.writer.add_document(doc)
    words.finish()


FILLER = "\u00b7"
"""A token no query asks for (a query word never holds '·'), padding an identifier field to its text's length.

BM25 divides a term's weight by its field's length. Without padding the length
of `body_ids` is the number of identifiers a page holds, so the page about
`tcgen05.ld`, dense in identifiers, lost to a page of prose that names it once
in a diagram; padded, an identifier field is as long as its text in words, and
the page using the term throughout ranks first, as it does for plain words.
"""


def _add_ids(doc: Any, name: str, identifiers: str, words: int) -> None:
    """`identifiers` as field `name` of `doc`, padded with FILLER to `words` tokens (see FILLER)."""
    doc.add_text(name, identifiers)
    pad = words - identifiers.count(" ") - 1
    if pad > 0:
        doc.add_text(name, (FILLER + " ") * pad)


def _length(text: str) -> int:
    """About how many words `text` holds (spaces and newlines: cheaper than splitting it)."""
    return text.count(" ") + text.count("\n") + 1


def _add_searched(doc: Any, name: str, text: str) -> tuple[str, str]:
    """Index `text` as the searched text `name` of `doc` (its plain words, then its identifiers); returns what was added."""
    plain, identifiers = index_terms(text)
    words = f"{text}\n{plain}" if plain else text
    doc.add_text(name, words)
    if identifiers:
        _add_ids(doc, name + IDS, identifiers, _length(words))
    return words, identifiers


def _add_terms(doc: Any, name: str, parts: list[tuple[str, str]]) -> None:
    """Index several texts already split by `_add_searched` as one searched text `name` (a page's body from its sections)."""
    words = "\n".join(words for words, _ids in parts)
    doc.add_text(name, words)
    identifiers = " ".join(ids for _words, ids in parts if ids)
    if identifiers:
        _add_ids(doc, name + IDS, identifiers, _length(words))


SECTION_SEPARATOR = "\0"


def _pack_section(heading: str, anchor: str, text: str) -> bytes:
    """A section's stored data: heading, anchor and text joined by NUL (a NUL inside one reads as U+FFFD).

    Written 60,000 times for 10,000 pages: several times cheaper than JSON.
    """
    return SECTION_SEPARATOR.join(f.replace(SECTION_SEPARATOR, "\ufffd") for f in (heading, anchor, text)).encode()


def _unpack_section(data: bytes) -> dict[str, str]:
    heading, anchor, text = bytes(data).decode().split(SECTION_SEPARATOR)
    return {"heading": heading, "anchor": anchor, "text": text}
