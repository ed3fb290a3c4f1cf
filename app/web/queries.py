"""Read queries the HTML views need beyond the services' (app/pages.py): page source, link map, run summary.

They read through the request's connection, never write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlmodel import col, select

from app.index.db import chunks
from app.index.models import EvidenceRow, PageRow, SnippetRow


@dataclass(frozen=True)
class PageSource:
    """What re-rendering a page body needs: the Markdown and where it sits in its file."""

    body: str
    body_line: int
    path: str
    content_hash: str


@dataclass(frozen=True)
class LinkMap:
    """The pages a body's links may name, for turning them into page URLs."""

    ids: frozenset[str]  # page ids among the body's link targets that exist
    paths: dict[str, str]  # file path → page id, of the .md paths the body links to that exist
    key: int  # changes when what the links resolve to changes


def page_source(conn: Connection, page_id: str) -> PageSource | None:
    row = conn.execute(
        select(PageRow.body, PageRow.body_line, PageRow.path, PageRow.content_hash).where(PageRow.id == page_id)
    ).first()
    return PageSource(row.body, row.body_line, row.path, row.content_hash) if row else None


def link_map(conn: Connection, ids: frozenset[str], paths: frozenset[str]) -> LinkMap:
    """Which of `ids` (page ids) and `paths` (file paths) a body links to are pages: one indexed lookup a page
    view, never every page (a map of every page's id and path was ~23 MB in each worker at 100,000 pages)."""
    found_ids: set[str] = set()
    found_paths: dict[str, str] = {}
    for chunk in chunks(sorted(ids), 500):
        found_ids.update(conn.execute(select(PageRow.id).where(col(PageRow.id).in_(chunk))).scalars())
    for chunk in chunks(sorted(paths), 500):
        found_paths.update(
            (path, pid) for pid, path in conn.execute(select(PageRow.id, PageRow.path).where(col(PageRow.path).in_(chunk)))
        )
    return LinkMap(frozenset(found_ids), found_paths, hash((frozenset(found_ids), frozenset(found_paths.items()))))


def snippet_errors(conn: Connection, page_id: str) -> dict[str, str]:
    """Why each invalid block of a page cannot be verified (mode `error`)."""
    rows = conn.execute(select(SnippetRow.id, SnippetRow.data).where(SnippetRow.page_id == page_id, SnippetRow.mode == "error"))
    return {sid: str(json.loads(data).get("error") or "") for sid, data in rows}


def latest_run(conn: Connection) -> dict[str, Any] | None:
    """The newest evidence record's data (when, where, with which toolchain), or None."""
    row = conn.execute(select(EvidenceRow.data).order_by(col(EvidenceRow.timestamp).desc()).limit(1)).first()
    return json.loads(row.data) if row else None


def page_titles(conn: Connection, page_ids: list[str]) -> dict[str, str]:
    """Titles of the given pages (a window's, never the whole wiki's)."""
    return dict(conn.execute(select(PageRow.id, PageRow.title).where(col(PageRow.id).in_(page_ids))).all()) if page_ids else {}
