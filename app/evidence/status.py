"""Snippet statuses for listings: paged in SQL where no status is asked for, else from a status index.

A snippet's status follows the rules of `runner.status` (their one home), applied by
`EvidenceStore.snippets_with_evidence`. Listings that filter or count by status use a
`StatusIndex`: one compact row per snippet (id, page, position, language, targets,
status), built by applying those rules to every snippet once per *data version*
(index generation, evidence count, newest record) and kept by the `Store`. So a
request filters and pages small tuples; only the first request after the wiki or
the evidence changed reads the evidence to rebuild it. Listings without a status
filter never read evidence: `snippet_window` pages the snippet table in SQL.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import func, text
from sqlalchemy.engine import Connection
from sqlmodel import select

from app.index.db import index_generation
from app.index.models import EvidenceRow


def data_version(conn: Connection) -> tuple[Any, ...]:
    """Changes whenever snippets or evidence change: the index generation, the evidence count and newest stamp.

    Evidence is only ever added (a record id is stored once), so its count grows with every insert. On
    SQLite the largest rowid grows the same way and costs one index step instead of a count of every row.
    """
    generation = index_generation(conn)
    grows = text("max(rowid)") if conn.dialect.name == "sqlite" else func.count()
    count, newest = conn.execute(select(grows, func.max(EvidenceRow.timestamp)).select_from(EvidenceRow)).one()
    return generation, count or 0, newest


class SnippetState(NamedTuple):
    id: str
    page_id: str
    position: int
    lang: str
    targets: tuple[str, ...]
    status: str


@dataclass(frozen=True)
class StatusIndex:
    """Every snippet's status, in page and position order, for one data version."""

    version: tuple[Any, ...]
    snippets: list[SnippetState]
    evidence_count: int = 0  # records stored (counted once per data version)

    def select(
        self, page_id: str | None = None, lang: str | None = None, target: str | None = None, status: str | None = None
    ) -> list[SnippetState]:
        return [
            s
            for s in self.snippets
            if (not page_id or s.page_id == page_id)
            and (not lang or s.lang == lang)
            and (not target or target in s.targets)
            and (not status or s.status == status)
        ]

    def counts(self) -> Counter[str]:
        return Counter(s.status for s in self.snippets)

    def page_counts(self, page_ids: list[str]) -> dict[str, Counter[str]]:
        wanted = set(page_ids)
        out: dict[str, Counter[str]] = {}
        for s in self.snippets:
            if s.page_id in wanted:
                out.setdefault(s.page_id, Counter())[s.status] += 1
        return out


def build_status_index(
    conn: Connection, evidence: Any, version: tuple[Any, ...], previous: StatusIndex | None = None
) -> StatusIndex:
    """Apply the status rules to every snippet, or, when only evidence was added since `previous`,
    to the snippets that got new records (see `changed_since`)."""
    changed = changed_since(conn, previous.version, version) if previous is not None else None
    if previous is not None and changed is not None:
        fresh = {s.id: _state(s) for chunk in _chunks(changed) for s in evidence.snippets_with_evidence(conn, ids=chunk)}
        added = (
            conn.execute(text("SELECT count(*) FROM evidence WHERE rowid > :last"), {"last": previous.version[1]}).scalar() or 0
        )
        return StatusIndex(version, [fresh.get(s.id, s) for s in previous.snippets], previous.evidence_count + added)
    rows = [_state(s) for s in evidence.snippets_with_evidence(conn)]
    count = conn.execute(select(func.count()).select_from(EvidenceRow)).scalar() or 0
    return StatusIndex(version, rows, count)


def changed_since(conn: Connection, old: tuple[Any, ...], new: tuple[Any, ...]) -> list[str] | None:
    """Snippets with evidence stored between two data versions, or None when that cannot be told cheaply
    (the wiki was reindexed, or PostgreSQL, whose version is a count): then everything is recomputed.

    On SQLite evidence rows get growing rowids and are never deleted, so the new ones are `rowid > old`.
    """
    if conn.dialect.name != "sqlite" or old[0] != new[0] or old[1] is None or new[1] is None or new[1] < old[1]:
        return None
    rows = conn.execute(text("SELECT DISTINCT snippet_id FROM evidence WHERE rowid > :last"), {"last": old[1]})
    return sorted(r[0] for r in rows)


def _state(s: Any) -> SnippetState:
    return SnippetState(s.id, s.page_id, s.position, s.lang, tuple(s.targets), s.status)


def _chunks(ids: list[str], size: int = 500) -> list[list[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


@dataclass
class SnippetWindow:
    ids: list[str]
    total: int


def snippet_window(
    conn: Connection,
    page_id: str | None = None,
    lang: str | None = None,
    target: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> SnippetWindow:
    """Ids of one window of snippets (page, position order) and the exact total, filtered and paged in SQL.

    Reads no evidence. (`target` matches a declared target: the JSON list is searched for the quoted name.)
    """
    where: list[str] = []
    params: dict[str, Any] = {"lim": limit, "off": offset}
    if page_id:
        where.append("s.page_id = :page")
        params["page"] = page_id
    if lang:
        where.append("s.lang = :lang")
        params["lang"] = lang
    if target:
        # a LIKE on the JSON text, with the wildcards in the name escaped so `sm_90a` matches only itself
        where.append("s.targets LIKE :target_like ESCAPE '!'")
        params["target_like"] = '%"' + target.replace("!", "!!").replace("%", "!%").replace("_", "!_") + '"%'
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    total = conn.execute(text(f"SELECT count(*) FROM snippet s {cond}"), params).scalar() or 0
    ids = [
        r[0]
        for r in conn.execute(
            text(f"SELECT s.id FROM snippet s {cond} ORDER BY s.page_id, s.position LIMIT :lim OFFSET :off"), params
        )
    ]
    return SnippetWindow(ids, total)
