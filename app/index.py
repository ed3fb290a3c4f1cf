"""Indexing: wiki folder → SQL index, incrementally and atomically.

Only files whose size, mtime or content changed are parsed again; files that
disappeared leave the index. The whole reindex is one transaction, so readers
(WAL mode on SQLite, MVCC on PostgreSQL) see either the old index or the new
one, never a half-built one. Files with errors are retried on every reindex,
because their problem may lie in another file (a duplicate id).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from app.markdown import render
from app.models import (
    AliasRow,
    ArchitectureRow,
    DiagnosticRow,
    FileRow,
    LanguageRow,
    LinkRow,
    PageRow,
    SectionRow,
    SnippetRow,
    TagRow,
)
from app.pages import Diagnostic, Page, iter_page_files, parse_page
from app.search import PAGE_ROW, SearchBackend, SectionDoc

PAGE_TABLES = (AliasRow, TagRow, LanguageRow, ArchitectureRow, SectionRow, SnippetRow)


@dataclass
class IndexReport:
    """What a reindex did."""

    added: list[str] = field(default_factory=list)  # page ids new to the index
    updated: list[str] = field(default_factory=list)  # page ids whose file changed
    removed: list[str] = field(default_factory=list)  # page ids that left the index
    unchanged: int = 0  # files skipped because nothing changed
    failed: list[str] = field(default_factory=list)  # paths of files with errors (not indexed)
    changed_snippets: list[str] = field(default_factory=list)  # snippet ids whose content hash is new
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: float = 0.0


def family(arch: str) -> str:
    """`sm90a` → `sm90`, `sm100f` → `sm100`: what an `arch=` filter matches on."""
    return arch.rstrip("af") if arch[-1:] in ("a", "f") else arch


def _snippets_of(page: Page) -> tuple[list[Any], list[Diagnostic]]:
    """Extract a page's verifiable code blocks (see docs/snippets.md)."""
    from snippets.extract import extract_snippets

    found, problems = extract_snippets(page.id, page.path, page.body, page.body_line, page.architectures)
    return found, [Diagnostic(p.path, p.line, p.severity, p.message) for p in problems]


def _page_ids(conn: Connection, paths: list[str]) -> dict[str, str]:
    rows = conn.execute(select(FileRow.path, FileRow.page_id).where(FileRow.page_id.is_not(None)))
    wanted = set(paths)
    return {path: pid for path, pid in rows if path in wanted}


def _delete_pages(conn: Connection, backend: SearchBackend, page_ids: list[str]) -> None:
    if not page_ids:
        return
    for table in PAGE_TABLES:
        conn.execute(delete(table).where(table.page_id.in_(page_ids)))
    conn.execute(delete(LinkRow).where(LinkRow.source_id.in_(page_ids)))
    conn.execute(delete(PageRow).where(PageRow.id.in_(page_ids)))
    backend.remove_pages(conn, page_ids)


def _insert_page(
    conn: Connection, backend: SearchBackend, page: Page, next_section: int, known_hashes: set[str]
) -> tuple[int, list[str], list[Diagnostic]]:
    """Write one page and its rows; returns the next free section id and new snippet ids."""
    rendered = render(page.body)
    meta = {
        "id": page.id, "title": page.title, "type": page.type, "architectures": page.architectures,
        "languages": page.languages, "tags": page.tags, "aliases": page.aliases,
        "confidence": page.confidence, "evidence_level": page.evidence_level,
        "evidence_basis": page.evidence_basis, "related": page.related, "sources": page.sources,
        **page.extra,
    }  # fmt: skip
    conn.execute(
        insert(PageRow),
        [{
            "id": page.id, "title": page.title, "type": page.type, "path": page.path,
            "confidence": page.confidence, "evidence_level": page.evidence_level,
            "meta": json.dumps(meta), "body": page.body, "body_line": page.body_line,
            "html": rendered.html, "toc": json.dumps(rendered.toc), "content_hash": page.content_hash,
        }],
    )  # fmt: skip
    if page.aliases:
        conn.execute(insert(AliasRow), [{"page_id": page.id, "alias": a, "alias_lower": a.lower()} for a in page.aliases])
    if page.tags:
        conn.execute(insert(TagRow), [{"page_id": page.id, "tag": t} for t in page.tags])
    if page.languages:
        conn.execute(insert(LanguageRow), [{"page_id": page.id, "language": lang} for lang in page.languages])
    if page.architectures:
        conn.execute(
            insert(ArchitectureRow),
            [{"page_id": page.id, "arch": a, "family": family(a)} for a in page.architectures],
        )
    links = [
        {"source_id": page.id, "target_id": t, "kind": kind, "resolved": False}
        for kind in ("related", "sources")
        for t in getattr(page, kind)
    ]
    if links:
        conn.execute(insert(LinkRow), links)
    section_rows = []
    docs = [SectionDoc(PAGE_ROW, page.id, page.title + " " + page.id, " ".join(page.aliases), " ".join(page.tags), "", "")]
    for section in rendered.sections:
        sid = next_section
        next_section += 1
        section_rows.append({
            "id": sid, "page_id": page.id, "position": section.position, "level": section.level,
            "heading": section.heading, "anchor": section.anchor,
            "line": page.body_line + section.line - 1, "text": section.text,
        })  # fmt: skip
        docs.append(SectionDoc(sid, page.id, "", "", "", section.heading, section.text))
    if section_rows:
        conn.execute(insert(SectionRow), section_rows)
    backend.add(conn, docs)
    found, diags = _snippets_of(page)
    new_ids: list[str] = []
    if found:
        rows = []
        for snip in found:
            data = snip.to_dict()
            rows.append({
                "id": data["id"], "page_id": page.id, "position": data["index"], "line": data["line"],
                "lang": data["lang"], "mode": data["mode"], "targets": json.dumps(data["targets"]),
                "content_hash": data["content_hash"], "data": json.dumps(data),
            })  # fmt: skip
            if data["content_hash"] not in known_hashes:
                new_ids.append(data["id"])
        conn.execute(insert(SnippetRow), rows)
    return next_section, new_ids, diags


def reindex(engine: Engine, backend: SearchBackend, root: Path, force: bool = False) -> IndexReport:
    """Bring the index in line with the wiki folder in one transaction."""
    started = time.perf_counter()
    report = IndexReport()
    root = Path(root).resolve()
    on_disk: dict[str, tuple[Path, int, int]] = {}
    for path in iter_page_files(root) if root.is_dir() else []:
        st = path.stat()
        on_disk[path.relative_to(root).as_posix()] = (path, st.st_mtime_ns, st.st_size)

    with engine.begin() as conn:
        known = {row.path: row for row in conn.execute(FileRow.__table__.select())}
        gone = [p for p in known if p not in on_disk]
        candidates = [
            rel for rel, (_, mtime, size) in on_disk.items()
            if force or rel not in known or known[rel].page_id is None
            or (known[rel].mtime_ns, known[rel].size) != (mtime, size)
        ]  # fmt: skip
        report.unchanged = len(on_disk) - len(candidates)

        parsed: dict[str, tuple[bytes, str]] = {}
        for rel in candidates:
            path, mtime, size = on_disk[rel]
            try:
                raw = path.read_bytes()
            except OSError as exc:
                report.diagnostics.append(Diagnostic(rel, 1, "error", f"cannot read file: {exc.strerror}"))
                raw = b""
            digest = hashlib.sha256(raw).hexdigest()
            old = known.get(rel)
            if not force and old is not None and old.page_id is not None and old.content_hash == digest:
                conn.execute(update(FileRow).where(FileRow.path == rel).values(mtime_ns=mtime, size=size))
                report.unchanged += 1
                continue
            parsed[rel] = (raw, digest)

        old_ids = _page_ids(conn, gone + list(parsed))
        # Ids held by files that stay as they are: a new page may not take one of them.
        kept_ids = {
            row.page_id: rel for rel, row in known.items()
            if row.page_id is not None and rel not in old_ids and rel in on_disk
        }  # fmt: skip
        pages: list[Page] = []
        failed: dict[str, list[Diagnostic]] = {}
        for rel in sorted(parsed):
            page, diags = parse_page(parsed[rel][0], rel)
            if page is not None:
                owner = kept_ids.get(page.id)
                if owner is not None:
                    diags.append(Diagnostic(rel, page.line_of("id"), "error", f"duplicate id '{page.id}': also used by {owner}; this page is left out"))
                    page = None
                else:
                    kept_ids[page.id] = rel
            if page is None:
                failed[rel] = diags
            else:
                pages.append(page)
            report.diagnostics.extend(diags)

        known_hashes = {h for (h,) in conn.execute(select(SnippetRow.content_hash))}
        _delete_pages(conn, backend, sorted(set(old_ids.values())))
        conn.execute(delete(FileRow).where(FileRow.path.in_(gone + list(parsed))))
        conn.execute(delete(DiagnosticRow).where(DiagnosticRow.path.in_(gone + list(parsed))))
        next_section = (conn.execute(select(func.max(SectionRow.id))).scalar() or 0) + 1
        for page in pages:
            next_section, new_snips, diags = _insert_page(conn, backend, page, next_section, known_hashes)
            report.changed_snippets.extend(new_snips)
            report.diagnostics.extend(diags)
        path_to_id = {p.path: p.id for p in pages}
        file_rows = []
        for rel, (raw, digest) in parsed.items():
            _, mtime, size = on_disk[rel]
            page_id = path_to_id.get(rel)
            file_rows.append({"path": rel, "mtime_ns": mtime, "size": size, "content_hash": digest, "page_id": page_id})
        if file_rows:
            conn.execute(insert(FileRow), file_rows)
        diag_rows = [
            {"path": d.path, "line": d.line, "severity": d.severity, "message": d.message}
            for d in report.diagnostics
        ]
        if diag_rows:
            conn.execute(insert(DiagnosticRow), diag_rows)
        if parsed or gone:
            page_ids = select(PageRow.id)
            conn.execute(update(LinkRow).values(resolved=LinkRow.target_id.in_(page_ids)))

        new_ids = {p.id for p in pages}
        previous = set(old_ids.values())
        report.added = sorted(new_ids - previous)
        report.updated = sorted(new_ids & previous)
        report.removed = sorted(previous - new_ids)
        report.failed = sorted(failed)
    report.seconds = time.perf_counter() - started
    return report
