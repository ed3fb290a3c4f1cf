"""Full-text search on PostgreSQL: a stored, weighted tsvector per section, GIN-indexed, ranked with ts_rank.

Same rows as the SQLite backend (one page row with title/aliases/tags, one row
per section with heading/body; see `app.search.combine`) and the same text
handling: indexed text goes through `app.text.expand`, and both indexed text and
query terms are cut into words here, in Python, the way SQLite's `unicode61`
tokenizer with `tokenchars '_'` does. PostgreSQL's own parser would split
`cp_async_bulk` at '_' and read `cp.async.bulk` as a host name, so the tsvector
and the tsquery are built as literals, never parsed from user text.

Weights: title and aliases A, tags B, heading C, body D, ranked with
ts_rank weights {D,C,B,A} = {0.1, 0.3, 0.5, 1.0}, the same ratios as SQLite's
bm25 weights 10/10/5/3/1.

Typo tolerance: `search_term` keeps every alphabetic word of the index with the
number of rows that contain it; a trigram (pg_trgm) GiST index answers "the
words nearest to this one", and `app.text.correct` picks among them by edit
distance, exactly as it does over SQLite's whole vocabulary.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict

from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.search import MAX_HITS, WEIGHTS, Hit, SectionDoc, combine
from app.text import expand, typo_limit

WORD = re.compile(r"\w+")
"""A word as SQLite's unicode61 tokenizer with tokenchars '_' sees it: letters, digits and '_'."""

MAX_LEXEME = 255
"""Characters kept of a word (PostgreSQL refuses lexemes over 2 kB); queries are cut the same way."""
MAX_POSITION = 16383  # PostgreSQL's largest tsvector position
MAX_POSITIONS_PER_WORD = 255  # PostgreSQL keeps at most 256 positions per lexeme
RANK_WEIGHTS = "{%s,%s,%s,%s}" % tuple(WEIGHTS[k] / WEIGHTS["title"] for k in ("body", "heading", "tags", "title"))
RANK_NORMALIZATION = 1  # divide by 1 + log(document length): longer sections weigh each hit less, like bm25
SUGGESTIONS = 64
"""Vocabulary words, nearest by trigram distance, that typo correction chooses from."""

# Kept in step with app/migrations/versions/0001_initial.py (which must not import this module).
DDL = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE TABLE IF NOT EXISTS search_doc ("
    " page_id VARCHAR NOT NULL, section_id INTEGER NOT NULL, tsv TSVECTOR NOT NULL,"
    " PRIMARY KEY (page_id, section_id))",
    "CREATE INDEX IF NOT EXISTS ix_search_doc_tsv ON search_doc USING gin (tsv)",
    "CREATE TABLE IF NOT EXISTS search_term (word VARCHAR PRIMARY KEY, docs INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ix_search_term_trgm ON search_term USING gist (word gist_trgm_ops)",
)


def normalize(value: str) -> str:
    """Lowercase without diacritics (unicode61's remove_diacritics 2): `Café` → `cafe`."""
    decomposed = unicodedata.normalize("NFKD", value.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(value: str) -> list[str]:
    """The words of a text, normalized and cut to MAX_LEXEME characters."""
    return [w[:MAX_LEXEME] for w in WORD.findall(normalize(value))]


def quote(word: str) -> str:
    """A lexeme as a tsvector/tsquery literal: quoted, with ' and \\ escaped."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(fields: list[tuple[str, str]]) -> tuple[str, set[str]]:
    """A weighted tsvector literal of (weight, text) fields in order, and the set of its words."""
    positions: dict[str, list[str]] = defaultdict(list)
    pos = 0
    for weight, value in fields:
        for word in words(value):
            pos = min(pos + 1, MAX_POSITION)
            slots = positions[word]
            if len(slots) < MAX_POSITIONS_PER_WORD:
                slots.append(f"{pos}{weight}")
    literal = " ".join(f"{quote(w)}:{','.join(p)}" for w, p in positions.items())
    return literal, set(positions)


def tsquery_literal(terms: list[str], any_term: bool) -> str:
    """A tsquery of prefix terms; every word quoted, so nothing a user types is an operator."""
    groups = []
    for term in terms:
        parts = words(term)
        if parts:
            groups.append("(" + " & ".join(quote(p) + ":*" for p in parts) + ")")
    return (" | " if any_term else " & ").join(groups)


def is_vocabulary_word(word: str) -> bool:
    """Words typo correction may suggest (app.store keeps alphabetic words only; correct() needs 3+ letters)."""
    return len(word) >= 3 and word.isalpha()


class PostgresSearch:
    """PostgreSQL full-text search with the SQLite backend's rows, weights and identifier handling."""

    def create(self, conn: Connection) -> None:
        """Create the search tables (the migrations do this; kept for callers outside them)."""
        for statement in DDL:
            conn.exec_driver_sql(statement)

    def add(self, conn: Connection, docs: list[SectionDoc]) -> None:
        if not docs:
            return
        rows = []
        vocabulary: Counter[str] = Counter()
        for d in docs:
            literal, found = tsvector_literal([
                ("A", expand(d.title)), ("A", expand(d.aliases)), ("B", expand(d.tags)),
                ("C", expand(d.heading)), ("D", expand(d.body)),
            ])  # fmt: skip
            rows.append({"page_id": d.page_id, "section_id": d.section_id, "tsv": literal})
            vocabulary.update(w for w in found if is_vocabulary_word(w))
        conn.execute(
            text("INSERT INTO search_doc (page_id, section_id, tsv) VALUES (:page_id, :section_id, CAST(:tsv AS tsvector))"),
            rows,
        )
        if vocabulary:
            ordered = sorted(vocabulary)  # one lock order for concurrent writers
            conn.execute(
                text(
                    "INSERT INTO search_term (word, docs) "
                    "SELECT * FROM unnest(CAST(:words AS varchar[]), CAST(:counts AS integer[])) "
                    "ON CONFLICT (word) DO UPDATE SET docs = search_term.docs + excluded.docs"
                ),
                {"words": ordered, "counts": [vocabulary[w] for w in ordered]},
            )

    def remove_pages(self, conn: Connection, page_ids: list[str]) -> None:
        if not page_ids:
            return
        touched = conn.execute(
            text(
                "WITH gone AS (DELETE FROM search_doc WHERE page_id = ANY(:ids) RETURNING tsv), "
                "w AS (SELECT lexeme, count(*) AS n FROM gone, unnest(tsvector_to_array(gone.tsv)) AS lexeme GROUP BY lexeme) "
                "UPDATE search_term t SET docs = t.docs - w.n FROM w WHERE t.word = w.lexeme RETURNING t.word, t.docs"
            ),
            {"ids": list(page_ids)},
        ).all()
        unused = [word for word, docs in touched if docs <= 0]
        if unused:
            conn.execute(text("DELETE FROM search_term WHERE word = ANY(:words) AND docs <= 0"), {"words": unused})

    def match(
        self, conn: Connection, terms: list[str], any_term: bool, page_filter_sql: str, params: dict
    ) -> list[Hit]:
        query = tsquery_literal(terms, any_term)
        if not query:
            return []
        sql = (
            f"SELECT page_id, section_id, ts_rank('{RANK_WEIGHTS}', tsv, q, {RANK_NORMALIZATION}) AS rank "
            f"FROM search_doc, CAST(:q AS tsquery) AS q WHERE tsv @@ q {page_filter_sql} "
            f"ORDER BY rank DESC LIMIT {MAX_HITS}"
        )
        rows = conn.execute(text(sql), {"q": query, **params})
        # ts_rank is a small fraction; scale it so scores read like SQLite's (only their order matters).
        return combine((page_id, int(section_id), float(rank) * 100.0) for page_id, section_id, rank in rows)

    def vocabulary(self, conn: Connection) -> list[str]:
        """Every word typo correction may suggest (prefer `candidates`: it asks the trigram index)."""
        return list(conn.execute(text("SELECT word FROM search_term")).scalars())

    def candidates(self, conn: Connection, term: str) -> list[str]:
        """The vocabulary words nearest to `term` by trigram distance, within its typo limit's lengths.

        `app.store` calls this, when present, instead of reading the whole vocabulary:
        the GiST index answers in milliseconds at any index size.
        """
        limit = typo_limit(term)
        if limit == 0:
            return []
        return list(
            conn.execute(
                text(
                    "SELECT word FROM search_term WHERE char_length(word) BETWEEN :lo AND :hi "
                    "ORDER BY word <-> :term LIMIT :n"
                ),
                {"term": term, "lo": len(term) - limit, "hi": len(term) + limit, "n": SUGGESTIONS},
            ).scalars()
        )
