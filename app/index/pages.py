"""The wiki as a whole: every page of a folder read, and the checks across pages.

Reading one page (front matter, `Page`, `Diagnostic`) is the lowest layer's job:
snippets/page.py, which the runner uses too. Standard library and PyYAML only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from snippets.diagnostic import Diagnostic
from snippets.page import Page, PageIds, inside, load_page
from snippets.repository import Repository, check_page, is_source_type, open_repository, page_files


def links_leaving(root: Path) -> list[Diagnostic]:
    """A warning for every file or folder under the wiki root whose real path is outside it (such links are not indexed).

    One `scandir` a folder: a directory entry tells a link without a `stat` (a reindex asks on every run).
    """
    real_root = os.path.realpath(root)
    found: list[Diagnostic] = []
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if not inside(real, real_root):
                    rel = os.path.relpath(entry.path, root).replace(os.sep, "/")
                    kind = "folder" if os.path.isdir(entry.path) else "file"
                    found.append(
                        Diagnostic(rel, 1, "warning", f"this {kind} links outside the wiki folder (to {real}); it is not indexed")
                    )
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return sorted(found, key=lambda d: d.path)


@dataclass
class Wiki:
    """All valid pages of a wiki folder, plus every diagnostic met while reading it."""

    pages: dict[str, Page]  # by id
    diagnostics: list[Diagnostic]  # errors and warnings; "info" lines for Markdown files skipped as not pages
    repository: Repository | None = None  # layout and schema the pages were read with

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def check_wiki(pages: list[Page]) -> tuple[dict[str, Page], list[Diagnostic]]:
    """Cross-page checks: duplicate ids, unresolved links, self links, contested aliases."""
    diags: list[Diagnostic] = []
    by_id: dict[str, Page] = {}
    ids = PageIds()
    for page in sorted(pages, key=lambda p: p.path):
        duplicate = ids.claim(page)
        if duplicate is not None:
            first = by_id[page.id]
            diags.append(duplicate)
            diags.append(
                Diagnostic(first.path, first.line_of("id"), "error", f"duplicate id '{page.id}': also used by {page.path}")
            )
            continue
        by_id[page.id] = page
    alias_owner: dict[str, Page] = {}
    for page in by_id.values():
        for key in ("related", "sources"):
            for target in getattr(page, key):
                if target == page.id:
                    diags.append(Diagnostic(page.path, page.line_of(key), "warning", f"page lists itself in '{key}'"))
                elif target not in by_id:
                    diags.append(Diagnostic(page.path, page.line_of(key), "warning", f"unresolved {key} id '{target}'"))
                elif key == "sources" and not is_source_type(by_id[target].type):
                    diags.append(
                        Diagnostic(
                            page.path,
                            page.line_of(key),
                            "warning",
                            f"sources id '{target}' is a '{by_id[target].type}' page, not a 'source'",
                        )
                    )
        for alias in page.aliases:
            owner = alias_owner.setdefault(alias.lower(), page)
            if owner is not page and owner.id != page.id:
                diags.append(
                    Diagnostic(
                        page.path,
                        page.line_of("aliases"),
                        "warning",
                        f"alias '{alias}' is also claimed by {owner.path} ({owner.id})",
                    )
                )
    return by_id, diags


def schema_problems(repo: Repository, page: Page) -> list[Diagnostic]:
    """A page against its repository's schema and vocabulary (lint reports them; the page is still served)."""
    return check_page(repo, page.id, page.type, page.front, page.line_of, page.path)


def load_wiki(root: Path) -> Wiki:
    """Read every page under `root`'s page folders; bad pages become diagnostics and are left out."""
    repo = open_repository(root)
    files, skipped = page_files(repo)
    parsed: list[Page] = []
    diags: list[Diagnostic] = list(repo.problems)
    for path in (p for _rel, p in files):
        page, page_diags = load_page(path, repo.root)
        diags.extend(page_diags)
        if page is not None:
            parsed.append(page)
            diags.extend(schema_problems(repo, page))
    pages, cross = check_wiki(parsed)
    return Wiki(pages=pages, diagnostics=skipped + diags + cross, repository=repo)
