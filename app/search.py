"""Full-text search over page sections: the SQLite FTS5 backend and its query plan.

All backend-specific SQL for search lives here (a PostgreSQL backend implements
the same `SearchBackend` protocol). A query is turned into terms by
`app.text.query_terms`, so nothing a user types reaches the SQL or the FTS
query language unescaped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.text import expand

# bm25 column weights: title and aliases above tags, tags above headings, headings above body.
WEIGHTS = {"title": 10.0, "aliases": 10.0, "tags": 5.0, "heading": 3.0, "body": 1.0}
MAX_HITS = 20000
"""Section hits read per query; beyond this the tail is ignored (totals stay exact per page)."""


@dataclass
class SectionDoc:
    """What is indexed for one section: page-level fields repeated, plus the section's own text."""

    section_id: int
    page_id: str
    title: str
    aliases: str
    tags: str
    heading: str
    body: str


@dataclass
class Hit:
    """The best section of one matching page."""

    page_id: str
    section_id: int
    score: float  # higher is better
    sections: list[int] = field(default_factory=list)


class SearchBackend(Protocol):
    """Backend-specific search SQL; everything else about search is shared."""

    def create(self, conn: Connection) -> None: ...
    def add(self, conn: Connection, docs: list[SectionDoc]) -> None: ...
    def remove_pages(self, conn: Connection, page_ids: list[str]) -> None: ...
    def match(self, conn: Connection, terms: list[str], any_term: bool, page_filter_sql: str, params: dict) -> list[Hit]: ...
    def vocabulary(self, conn: Connection) -> list[str]: ...


PAGE_ROW = 0
"""section_id of the row that holds a page's title, aliases and tags; section rows hold heading and body."""


def combine(rows: Iterable[tuple[str, int, float]]) -> list[Hit]:
    """Per page: score = page-row score + best section score; the best section is the answer's section."""
    hits: dict[str, Hit] = {}
    page_scores: dict[str, float] = {}
    for page_id, section_id, score in rows:
        if section_id == PAGE_ROW:
            page_scores[page_id] = max(score, page_scores.get(page_id, score))
            hits.setdefault(page_id, Hit(page_id, PAGE_ROW, 0.0, []))
            continue
        hit = hits.setdefault(page_id, Hit(page_id, PAGE_ROW, 0.0, []))
        if hit.section_id == PAGE_ROW or score > hit.score:
            hit.section_id, hit.score = section_id, score
        hit.sections.append(section_id)
    for page_id, hit in hits.items():
        hit.score += page_scores.get(page_id, 0.0)
    return list(hits.values())


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """`items` in batches of `size`: SQL statements take a bounded number of parameters."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def fts5_query(terms: list[str], any_term: bool) -> str:
    """An FTS5 MATCH expression of prefix terms: every term quoted, so no operator can be injected."""
    parts = ['"' + t.replace('"', '""') + '"*' for t in terms]
    return (" OR " if any_term else " ").join(parts)


class SqliteSearch:
    """SQLite FTS5 with bm25 ranking; the tokenizer keeps '_' inside words."""

    def create(self, conn: Connection) -> None:
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5("
            "page_id UNINDEXED, section_id UNINDEXED, title, aliases, tags, heading, body, "
            "tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\", prefix = '2 3 4')"
        )
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS search_vocab USING fts5vocab(search_fts, 'row')"
        )

    def add(self, conn: Connection, docs: list[SectionDoc]) -> None:
        """Rows get explicit rowids: a section's id, and minus its page's first section id for the page row,
        so a page's rows can be deleted by rowid (page_id is not indexed in FTS5)."""
        if not docs:
            return
        first: dict[str, int] = {}
        for d in docs:
            if d.section_id != PAGE_ROW:
                first[d.page_id] = min(d.section_id, first.get(d.page_id, d.section_id))
        conn.execute(
            text(
                "INSERT INTO search_fts (rowid, page_id, section_id, title, aliases, tags, heading, body) "
                "VALUES (:rowid, :page_id, :section_id, :title, :aliases, :tags, :heading, :body)"
            ),
            [
                {
                    "rowid": d.section_id if d.section_id != PAGE_ROW else -first[d.page_id],
                    "page_id": d.page_id,
                    "section_id": d.section_id,
                    "title": expand(d.title),
                    "aliases": expand(d.aliases),
                    "tags": expand(d.tags),
                    "heading": expand(d.heading),
                    "body": expand(d.body),
                }
                for d in docs
            ],
        )

    def remove_pages(self, conn: Connection, page_ids: list[str]) -> None:
        """Delete pages' rows by rowid, found through the section table (call before sections are deleted)."""
        for chunk in chunks(page_ids, 500):
            marks = ", ".join(f":p{i}" for i in range(len(chunk)))
            params = {f"p{i}": v for i, v in enumerate(chunk)}
            conn.execute(
                text(
                    f"DELETE FROM search_fts WHERE rowid IN (SELECT id FROM section WHERE page_id IN ({marks})) "
                    f"OR rowid IN (SELECT -min(id) FROM section WHERE page_id IN ({marks}) GROUP BY page_id)"
                ),
                params,
            )

    def match(
        self, conn: Connection, terms: list[str], any_term: bool, page_filter_sql: str, params: dict
    ) -> list[Hit]:
        w = WEIGHTS
        sql = (
            f"SELECT page_id, section_id, bm25(search_fts, 0, 0, {w['title']}, {w['aliases']}, "
            f"{w['tags']}, {w['heading']}, {w['body']}) AS rank FROM search_fts "
            f"WHERE search_fts MATCH :q {page_filter_sql} ORDER BY rank LIMIT {MAX_HITS}"
        )
        rows = conn.execute(text(sql), {"q": fts5_query(terms, any_term), **params})
        return combine((page_id, int(section_id), -float(rank)) for page_id, section_id, rank in rows)

    def vocabulary(self, conn: Connection) -> list[str]:
        return [row[0] for row in conn.exec_driver_sql("SELECT term FROM search_vocab")]
