"""Finding pages by name or file, and reading their Markdown bodies: one indexed query each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.index.models import AliasRow, PageRow
from snippets.repository import page_folders_of


@dataclass(frozen=True)
class RepositoryFiles:
    """How the repository that holds the wiki names a page's file: the one rule for a page's `file`.

    The index stores a page's path relative to the root `--wiki` names (`PageRow.path`). What a reader wants
    is the file's path in its repository:

    - a repository root in the KernelWiki layout (a `wiki/` folder, or KERNELWIKI_PAGE_FOLDERS): the root is the
      repository, so the path as stored (`wiki/hardware/tma.md`, `sources/prs/…/PR-1.md`);
    - a plain folder of pages (kernelwiki's own wiki/): the folder is taken to sit at the top of its repository
      under its own name, as the project's wiki/ does, so `wiki/hardware/tma.md` for the stored `hardware/tma.md`.

    `/wiki/{path}` (the docs browser's address of a file) names a file under the wiki pages folder: the layout's
    `wiki/` folder, or the plain folder itself.
    """

    prefix: str = ""  # what precedes a stored path in its repository ("" for a repository root)
    layout: bool = False  # whether the root is a repository root with page folders

    @classmethod
    def of(cls, root: Path | str) -> RepositoryFiles:
        root = Path(root)
        if page_folders_of(root) != [""]:
            return cls("", True)
        name = root.resolve().name
        return cls(f"{name}/" if name else "", False)

    def file(self, path: str) -> str:
        """A page's file in its repository, from its path relative to the wiki root."""
        return self.prefix + path

    def under_wiki(self, path: str) -> str:
        """The stored path of the file at `path` under the wiki pages folder (the address `/wiki/{path}`)."""
        return f"wiki/{path}" if self.layout else path


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
