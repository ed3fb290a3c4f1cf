"""Listing pages: one filtered window of pages, ordered by type and title, paged and counted in SQL, with facet counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlencode

from sqlalchemy import select, text
from sqlalchemy.engine import Connection
from sqlmodel import col

from app import keyset
from app.index.filters import Filters, filter_sql
from app.index.models import PageRow
from app.schemas import PageList, PageSummary

PAGE_KEY = (str, str, str)
"""The listing's sort key, (type, title, id): what a `next` token of /api/pages holds (app/keyset.py)."""


def list_pages(
    conn: Connection,
    filters: Filters,
    limit: int,
    offset: int,
    counts: Callable[[], dict[str, dict[str, int]]] | None,
    after: tuple[str, str, str] | None = None,
) -> PageList:
    """One window of the filtered pages, ordered by type and title: paged, counted and faceted in SQL.

    The window starts at `offset`, or right after the sort key `after` (keyset: a `next` token); `next` is the
    next window's query string, with a token.
    """
    where_sql, params = filter_sql(filters, column="id")
    where = "WHERE 1=1" + where_sql
    total = conn.execute(text(f"SELECT count(*) FROM page {where}"), params).scalar() or 0
    # The window's ids first, walking ix_page_listing in order (on SQLite `+id` keeps the planner from
    # probing the primary key once per filtered page and sorting them all), then only the window's rows.
    walk = "WHERE 1=1" + filter_sql(filters, column="+id" if conn.dialect.name == "sqlite" else "id")[0]
    if after is not None:
        walk += " AND (type, title, id) > (:after_type, :after_title, :after_id)"
        params = {**params, "after_type": after[0], "after_title": after[1], "after_id": after[2]}
    rows, last = keyset.window(
        conn.execute(
            text(f"SELECT id, type, title FROM page {walk} ORDER BY type, title, id LIMIT :lim OFFSET :off"),
            {**params, "lim": limit + 1, "off": 0 if after is not None else offset},
        ).all(),
        limit,
    )
    ids = [r[0] for r in rows]
    by_id = (
        {
            r.id: r
            for r in conn.execute(
                select(
                    col(PageRow.id),
                    col(PageRow.title),
                    col(PageRow.type),
                    col(PageRow.path),
                    col(PageRow.meta),
                    col(PageRow.confidence),
                ).where(col(PageRow.id).in_(ids))
            )
        }
        if ids
        else {}
    )
    rows = [by_id[i] for i in ids if i in by_id]
    facet_counts = counts() if counts is not None else {}
    pages = []
    for r in rows:
        meta = json.loads(r.meta)
        pages.append(
            PageSummary(
                id=r.id,
                title=r.title,
                type=r.type,
                path=r.path,
                architectures=meta.get("architectures", []),
                tags=meta.get("tags", []),
                confidence=r.confidence,
            )
        )
    next_q = (
        urlencode({**filters.as_params(), "limit": limit, "next": keyset.token((last[1], last[2], last[0]))})
        if last is not None
        else None
    )
    return PageList(
        total=total, limit=limit, offset=None if after is not None else offset, next=next_q, pages=pages, facets=facet_counts
    )


def page_facets(conn: Connection, filters: Filters) -> dict[str, dict[str, int]]:
    """Type, architecture family and top-30 tag counts of the filtered pages (GROUP BY in SQL)."""
    where_sql, params = filter_sql(filters, column="id")
    within = f" WHERE page_id IN (SELECT id FROM page WHERE 1=1{where_sql})" if where_sql else ""
    types = conn.execute(
        text(f"SELECT type, count(*) AS n FROM page WHERE 1=1{where_sql} GROUP BY type ORDER BY n DESC, type"), params
    )
    archs = conn.execute(
        text(f"SELECT family, count(DISTINCT page_id) AS n FROM architecture{within} GROUP BY family ORDER BY n DESC, family"),
        params,
    )
    tags = conn.execute(text(f"SELECT tag, count(*) AS n FROM tag{within} GROUP BY tag ORDER BY n DESC, tag LIMIT 30"), params)
    return {"type": dict(types.all()), "arch": dict(archs.all()), "tag": dict(tags.all())}
