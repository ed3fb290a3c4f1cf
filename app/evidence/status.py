"""Snippet statuses for listings, read in SQL from the statuses stored with the snippets.

A snippet's status follows the rules of `runner.status` (their one home), applied by
`EvidenceStore.snippets_with_evidence` and stored by `EvidenceStore.refresh_statuses`
wherever it can change: when evidence is stored and when the indexer writes snippet
rows (app/evidence/store.py). `snippet.status` holds the verdict and `snippet_target`
one line per snippet × target (the evidence dashboard's rows), so listings filter,
count and page statuses in SQL and no request applies the rules to more than its own
window: the first request after a start, a reindex or an evidence POST costs what
the next one does, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, text
from sqlalchemy.engine import Connection
from sqlmodel import select

from app import keyset
from app.index.db import chunks, index_generation
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


def status_counts(conn: Connection) -> Counter[str]:
    """Snippets per stored status (every snippet of the index)."""
    return Counter(dict(conn.execute(text("SELECT status, count(*) FROM snippet GROUP BY status")).all()))


def page_status_counts(conn: Connection, page_ids: list[str]) -> dict[str, Counter[str]]:
    """Page id → its snippets per stored status, for the pages given (one window of a listing)."""
    out: dict[str, Counter[str]] = {}
    for chunk in chunks(sorted(set(page_ids)), 500):
        params = {f"p{i}": p for i, p in enumerate(chunk)}
        marks = ", ".join(f":{k}" for k in params)
        for page_id, status, n in conn.execute(
            text(f"SELECT page_id, status, count(*) FROM snippet WHERE page_id IN ({marks}) GROUP BY page_id, status"), params
        ):
            out.setdefault(page_id, Counter())[status] = n
    return out


def _target_like(target: str) -> str:
    """A LIKE pattern finding `target` in a JSON list of names, its wildcards escaped (`sm_90a` matches only itself)."""
    return '%"' + target.replace("!", "!!").replace("%", "!%").replace("_", "!_") + '"%'


SNIPPET_KEY = (str, int)
"""The snippet listing's sort key, (page id, position): what a `next` token of /api/snippets holds (app/keyset.py)."""


@dataclass
class SnippetWindow:
    ids: list[str]  # the window's snippets, in order
    total: int  # snippets after every filter, all windows together
    last: tuple[str, int] | None  # the window's last sort key when more snippets follow it, else None


def snippet_window(
    conn: Connection,
    page_id: str | None = None,
    lang: str | None = None,
    target: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
    after: tuple[str, int] | None = None,
) -> SnippetWindow:
    """Ids of one window of snippets (page, position order) and the exact total, filtered and paged in SQL.

    The window starts at `offset`, or right after the sort key `after` (keyset paging). Reads no evidence:
    `status` is the stored one. (`target` matches a declared target: the JSON list is searched for the quoted name.)
    """
    where: list[str] = []
    params: dict[str, Any] = {"lim": limit + 1, "off": 0 if after is not None else offset}
    if page_id:
        where.append("s.page_id = :page")
        params["page"] = page_id
    if lang:
        where.append("s.lang = :lang")
        params["lang"] = lang
    if target:
        where.append("s.targets LIKE :target_like ESCAPE '!'")
        params["target_like"] = _target_like(target)
    if status:
        where.append("s.status = :status")
        params["status"] = status
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    total = conn.execute(text(f"SELECT count(*) FROM snippet s {cond}"), params).scalar() or 0
    if after is not None:
        where.append("(s.page_id, s.position) > (:after_page, :after_position)")
        params.update(after_page=after[0], after_position=after[1])
    walk = ("WHERE " + " AND ".join(where)) if where else ""
    rows, last = keyset.window(
        conn.execute(
            text(f"SELECT s.id, s.page_id, s.position FROM snippet s {walk} ORDER BY s.page_id, s.position LIMIT :lim OFFSET :off"),
            params,
        ).all(),
        limit,
    )
    return SnippetWindow([r[0] for r in rows], total, (last[1], last[2]) if last is not None else None)


@dataclass
class LineWindow:
    """One window of the evidence dashboard's snippet × target lines, worst first."""

    lines: list[tuple[str, str, str]]  # (snippet id, target, status) of this window's lines
    total: int  # lines after every filter
    statuses: Counter[str]  # lines per status, before the status filter


def line_window(
    conn: Connection,
    status: str | None = None,
    target: str | None = None,
    page_id: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> LineWindow:
    """The dashboard's lines (stored in `snippet_target`) filtered, counted and paged in SQL: worst status
    first, then page, position and target (sm_90a before sm_100a)."""
    where: list[str] = []
    params: dict[str, Any] = {"lim": limit, "off": offset}
    if target:
        where.append("target = :target")
        params["target"] = target
    if page_id:
        where.append("page_id = :page")
        params["page"] = page_id
    cond = "WHERE " + " AND ".join(where) if where else ""
    statuses: Counter[str] = Counter(
        dict(conn.execute(text(f"SELECT status, count(*) FROM snippet_target {cond} GROUP BY status"), params).all())
    )
    if status:
        where.append("status = :status")
        params["status"] = status
        cond = "WHERE " + " AND ".join(where)
    lines = [
        (r[0], r[1], r[2])
        for r in conn.execute(
            text(
                f"SELECT snippet_id, target, status FROM snippet_target {cond} "
                "ORDER BY status_rank, page_id, position, target_order, target LIMIT :lim OFFSET :off"
            ),
            params,
        )
    ]
    return LineWindow(lines, statuses[status] if status else sum(statuses.values()), statuses)


def line_targets(conn: Connection) -> list[str]:
    """Every target with a dashboard line (not the `—` of blocks never built)."""
    return [r[0] for r in conn.execute(text("SELECT DISTINCT target FROM snippet_target"))]


def line_pages(conn: Connection, limit: int = 1000) -> list[tuple[str, str]]:
    """(id, title) of pages with dashboard lines, by title, at most `limit` (the dashboard's page picker)."""
    rows = conn.execute(
        text(
            "SELECT p.id, p.title FROM page p WHERE EXISTS (SELECT 1 FROM snippet_target t WHERE t.page_id = p.id) "
            "ORDER BY lower(p.title), p.id LIMIT :lim"
        ),
        {"lim": limit},
    )
    return [(r[0], r[1]) for r in rows]
