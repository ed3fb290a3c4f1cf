"""Finding pages by name or file, and reading their Markdown bodies: one indexed query each."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.index.models import AliasRow, PageRow


def resolve(conn: Connection, name: str) -> str | None:
    """Alias, title or id (case-insensitive) → page id."""
    needle = name.strip().lower()
    if not needle:
        return None
    for stmt in (
        select(col(PageRow.id)).where(col(PageRow.id) == name.strip()),  # the id as spelled (pr-TensorRT-LLM-10042)
        select(col(PageRow.id)).where(col(PageRow.id_lower) == needle).order_by(col(PageRow.id)),  # in any case
        select(col(AliasRow.page_id))  # the strongest holder of the name (snippets.repository ALIAS_OWN, …)
        .where(col(AliasRow.alias_lower) == needle)
        .order_by(col(AliasRow.rank), col(AliasRow.page_id)),
        select(col(PageRow.id)).where(col(PageRow.title_lower) == needle).order_by(col(PageRow.id)),
    ):
        found = conn.execute(stmt.limit(1)).scalar()
        if found:
            return found
    return None


def page_by_path(conn: Connection, path: str) -> str | None:
    """The id of the page whose file is `path` (relative to the wiki root), if any."""
    return conn.execute(select(col(PageRow.id)).where(col(PageRow.path) == path)).scalar()


def page_sources(conn: Connection, page_ids: list[str]) -> dict[str, tuple[str, int]]:
    """Each existing page's Markdown body and the file line it starts on (for the Markdown views of app/agents)."""
    found: dict[str, tuple[str, int]] = {}
    for i in range(0, len(page_ids), 500):
        stmt = select(col(PageRow.id), col(PageRow.body), col(PageRow.body_line)).where(
            col(PageRow.id).in_(page_ids[i : i + 500])
        )
        found.update({r.id: (r.body, r.body_line) for r in conn.execute(stmt)})
    return found
