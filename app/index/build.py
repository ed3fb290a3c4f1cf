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
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import delete, exists, func, insert, or_, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col, select

from app.index.db import bulk_insert, chunks, index_generation, serialize_status_writers
from app.index.facets import facet_rows
from app.index.markdown import description, render
from app.index.models import (
    AliasRow,
    ArchitectureRow,
    DiagnosticRow,
    FacetRow,
    FileRow,
    LanguageRow,
    LinkRow,
    PageRow,
    PerformanceClaimRow,
    SectionRow,
    SnippetRow,
    SnippetTargetRow,
    StateRow,
    TagRow,
)
from app.index.pagefile import read_page
from app.index.pages import links_leaving, schema_problems
from app.index.perf import rows_for as perf_rows
from app.lifeline import exit_with
from snippets.architectures import family
from snippets.diagnostic import Diagnostic
from snippets.page import Page, PageIds, inside, parse_page
from snippets.repository import Repository, not_a_page, open_repository, skill_folders

PAGE_TABLES = (
    AliasRow,
    TagRow,
    LanguageRow,
    ArchitectureRow,
    SectionRow,
    SnippetRow,
    SnippetTargetRow,
    FacetRow,
    PerformanceClaimRow,
)
PARALLEL_THRESHOLD = 256
"""Files to parse before the work is spread over processes (start-up costs about half a second)."""
PARSE_BATCH = 64
"""Files a parsing worker takes at a time."""
LINK_SWEEP = 5000
"""Changed pages beyond which a reindex resolves every link in one statement rather than those of the changed pages."""
LZ4_SQL = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
"""Whether the PostgreSQL server can compress stored text with LZ4 (NULL before PostgreSQL 14)."""
INSERT_BATCH = 500
"""Pages whose rows are collected before they are written (one executemany or COPY per table)."""


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
    skipped: list[Diagnostic] = field(default_factory=list)  # info lines: Markdown files that are not pages
    seconds: float = 0.0


class _Known(NamedTuple):
    """What the index knows of a file, to decide whether to parse it again."""

    mtime_ns: int
    size: int
    content_hash: str
    page_id: str | None


@dataclass
class Prepared:
    """A file parsed, rendered and split into snippets: the CPU-heavy part, done in worker processes."""

    rel: str  # path relative to the wiki root
    digest: str  # sha256 of the file's bytes
    page: Page | None  # None when the file has errors
    diagnostics: list[Diagnostic]
    html: str = ""
    toc: list[dict[str, Any]] = field(default_factory=list)
    sections: list[Any] = field(default_factory=list)  # app.index.markdown.Section
    snippets: list[dict[str, Any]] = field(default_factory=list)  # Snippet.to_dict()
    description: str = ""  # the body's first sentence (llms.txt)


def prepare(rel: str, raw: bytes, digest: str) -> Prepared:
    """Parse, render and extract one file (pure: safe to run in another process)."""
    page, diags = parse_page(raw, rel)
    if page is None:
        return Prepared(rel, digest, None, diags)
    rendered = render(page.body)
    found: list[dict[str, Any]] = []
    if "```" in page.body or "~~~" in page.body:
        from snippets.extract import extract_snippets

        snips, problems = extract_snippets(page.id, page.path, page.body, page.body_line, page.architectures)
        found = [s.to_dict() for s in snips]
        diags = diags + problems
    return Prepared(rel, digest, page, diags, rendered.html, rendered.toc, rendered.sections, found, description(page.body))


def _prepare_all(items: list[tuple[str, bytes, str]]) -> Iterator[Prepared]:
    """Prepare files in order, across processes when there are many (a full index of a large wiki).

    A generator: each result is handed on as soon as its batch is parsed, so the caller inserts the first
    pages while the workers parse the rest (parsing and inserting overlap).
    """
    workers = os.cpu_count() or 1
    if len(items) < PARALLEL_THRESHOLD or workers < 2:
        yield from (prepare(*item) for item in items)
        return
    # Never fork: a child could inherit a lock some other thread held mid-step, and not every thread is
    # Python's to count (the server's, and native ones such as the search engine's). forkserver starts
    # children from a clean single-threaded server (it re-imports the caller's __main__, which every entry
    # point guards); its start-up is paid once per pool, and only for a wiki of PARALLEL_THRESHOLD files.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["app.index.build"])  # imported once in the server, not once per child
    # Each worker ends with this process even when it is killed (app/lifeline.py): no pool outlives a `kill -9`.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=exit_with, initargs=(os.getpid(),))
    try:
        yield from pool.map(prepare, *zip(*items, strict=True), chunksize=PARSE_BATCH)
    finally:  # also when the caller stops early (an error while inserting): the batches not yet started are dropped
        pool.shutdown(wait=True, cancel_futures=True)


def _delete_pages(conn: Connection, page_ids: list[str]) -> None:
    if not page_ids:
        return
    for chunk in chunks(page_ids, 500):
        for table in PAGE_TABLES:
            conn.execute(delete(table).where(col(table.page_id).in_(chunk)))
        conn.execute(delete(LinkRow).where(col(LinkRow.source_id).in_(chunk)))
        conn.execute(delete(PageRow).where(col(PageRow.id).in_(chunk)))


class _Rows:
    """Rows of every table, collected for a batch of pages and written with executemany."""

    def __init__(self) -> None:
        self.by_table: dict[Any, list[dict[str, Any]]] = {
            t: []
            for t in (
                PageRow,
                AliasRow,
                TagRow,
                LanguageRow,
                ArchitectureRow,
                LinkRow,
                SectionRow,
                SnippetRow,
                FacetRow,
                PerformanceClaimRow,
            )
        }

    def add_page(self, prep: Prepared, next_section: int) -> int:
        page = prep.page
        assert page is not None
        meta = {
            "id": page.id,
            "title": page.title,
            "type": page.type,
            "architectures": page.architectures,
            "languages": page.languages,
            "tags": page.tags,
            "aliases": page.aliases,
            "confidence": page.confidence,
            "evidence_level": page.evidence_level,
            "evidence_basis": page.evidence_basis,
            "related": page.related,
            "sources": page.sources,
            **page.extra,
        }
        rows = self.by_table
        rows[PageRow].append(
            {
                "id": page.id,
                "title": page.title,
                "title_lower": page.title.lower(),
                "type": page.type,
                "path": page.path,
                "confidence": page.confidence,
                "evidence_level": page.evidence_level,
                "meta": json.dumps(meta),
                "body": page.body,
                "body_line": page.body_line,
                "html": prep.html,
                "toc": json.dumps(prep.toc),
                "content_hash": page.content_hash,
                "description": prep.description,
            }
        )
        rows[AliasRow] += [{"page_id": page.id, "alias": a, "alias_lower": a.lower()} for a in page.aliases]
        rows[TagRow] += [{"page_id": page.id, "tag": t} for t in page.tags]
        rows[LanguageRow] += [{"page_id": page.id, "language": lang} for lang in page.languages]
        rows[ArchitectureRow] += [{"page_id": page.id, "arch": a, "family": family(a)} for a in page.architectures]
        rows[FacetRow] += facet_rows(page)
        rows[PerformanceClaimRow] += perf_rows(page)
        rows[LinkRow] += [
            {"source_id": page.id, "target_id": t, "kind": kind, "resolved": False}
            for kind in ("related", "sources")
            for t in getattr(page, kind)
        ]
        for section in prep.sections:
            rows[SectionRow].append(
                {
                    "id": next_section,
                    "page_id": page.id,
                    "position": section.position,
                    "level": section.level,
                    "heading": section.heading,
                    "anchor": section.anchor,
                    "line": page.body_line + section.line - 1,
                    "text": section.text,
                }
            )
            next_section += 1
        for data in prep.snippets:
            rows[SnippetRow].append(
                {
                    "id": data["id"],
                    "page_id": page.id,
                    "position": data["index"],
                    "line": data["line"],
                    "lang": data["lang"],
                    "mode": data["mode"],
                    "targets": json.dumps(data["targets"]),
                    "content_hash": data["content_hash"],
                    "data": json.dumps(data),
                }
            )
        return next_section

    def flush(self, conn: Connection) -> None:
        for table, rows in self.by_table.items():
            bulk_insert(conn, table, rows)
            rows.clear()


def _fast_walk(root: Path, repo: Repository | None = None) -> tuple[dict[str, tuple[str, int, int]], list[Diagnostic]]:
    """(rel path → (path, mtime_ns, size) of every page file, an info line per Markdown file that is not a page).

    os.scandir: one stat per file. Only the repository's page folders are walked
    (snippets/repository.py); folder links are not followed, and a file link counts
    only when its real path stays under the root (app.index.pages.links_leaving warns about the others).
    """
    found: dict[str, tuple[str, int, int]] = {}
    skipped: list[Diagnostic] = []
    real_root = os.path.realpath(root)
    folders = repo.page_folders if repo is not None else [""]
    skills = skill_folders(root, folders) if repo is not None and repo.is_layout else set()
    stack = [(root / top if top else root, top + "/" if top else "") for top in folders]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            if not os.path.isdir(root):  # the wiki folder itself went away mid-reindex: fail rather than drop every page
                raise
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), prefix + entry.name + "/"))
            elif entry.name.endswith(".md") and entry.is_file():
                if entry.is_symlink() and not inside(os.path.realpath(entry.path), real_root):
                    continue
                rel = prefix + entry.name
                reason = not_a_page(rel) or next(
                    (f"part of the agent skill bundle {s}/, not a page" for s in skills if rel.startswith(s + "/")), None
                )
                if reason is not None:
                    skipped.append(Diagnostic(rel, 1, "info", f"skipped: {reason}"))
                    continue
                st = entry.stat()
                found[rel] = (entry.path, st.st_mtime_ns, st.st_size)
    return dict(sorted(found.items())), sorted(skipped, key=lambda d: d.path)


def bump_generation(conn: Connection) -> None:
    """Mark the index as changed, so caches keyed on the generation (facets, vocabulary) refresh."""
    current = index_generation(conn)
    if current is None:
        conn.execute(insert(StateRow).values(key="generation", value=1))
    else:
        conn.execute(update(StateRow).where(col(StateRow.key) == "generation").values(value=current + 1))


DATA_FILES = ("data/schemas.yaml", "data/tags.yaml", "data/aliases.yaml")
"""A repository's data files: a change to any of them reparses every page (aliases, schema findings, vocabulary)."""
DATA_STATE_KEY = "data_files"


def data_files_digest(root: Path) -> int:
    """A number for the contents of the root's data files (a missing file counts as such): 28 bits of a SHA-256 (index_state holds 32-bit integers)."""
    digest = hashlib.sha256()
    for name in DATA_FILES:
        try:
            raw = (root / name).read_bytes()
        except OSError:
            raw = None
        digest.update(name.encode() + b"\0" + (b"-" if raw is None else b"+" + hashlib.sha256(raw).digest()))
    return int(digest.hexdigest()[:7], 16)


def _data_files_changed(conn: Connection, digest: int) -> bool:
    """Whether the data files differ from those of the last reindex (recording the new digest)."""
    stored = conn.execute(select(col(StateRow.value)).where(col(StateRow.key) == DATA_STATE_KEY)).scalar()
    if stored == digest:
        return False
    if stored is None:
        conn.execute(insert(StateRow).values(key=DATA_STATE_KEY, value=digest))
    else:
        conn.execute(update(StateRow).where(col(StateRow.key) == DATA_STATE_KEY).values(value=digest))
    return True


Judge = Callable[[Connection, list[str]], None]
"""Stores the statuses of snippets just written (app/evidence/store.py `EvidenceStore.refresh_statuses`), in the reindex's transaction."""


def reindex(engine: Engine, root: Path, force: bool = False, judge: Judge | None = None) -> IndexReport:
    """Bring the index in line with the wiki folder in one transaction (app.search follows it by generation).

    `judge` is given the ids of every snippet row written (new or edited pages), so their stored statuses
    follow the code they now hold (records of older code turn stale) in the same transaction.
    """
    started = time.perf_counter()
    report = IndexReport()
    root = Path(root).resolve()
    data_digest = data_files_digest(root) if root.is_dir() else None  # before the files are read: a later change reindexes again
    repo = open_repository(root) if root.is_dir() else None
    on_disk, skipped = _fast_walk(root, repo) if root.is_dir() else ({}, [])

    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            # A big transaction: keep its pages in memory (64 MiB) rather than spilling to the journal early.
            conn.exec_driver_sql("PRAGMA cache_size = -65536")
            conn.exec_driver_sql("PRAGMA temp_store = MEMORY")
        elif conn.dialect.name == "postgresql" and conn.exec_driver_sql(LZ4_SQL).scalar():
            # Page text is compressed as it is stored (TOAST): LZ4 costs the server a third less CPU than the
            # default pglz on a full index, and is read back faster. This transaction only; servers built
            # without LZ4 (or before PostgreSQL 14) keep their default.
            conn.exec_driver_sql("SET LOCAL default_toast_compression = 'lz4'")
        if data_digest is not None and _data_files_changed(conn, data_digest):
            force = True  # every page again: the aliases merged from data/aliases.yaml, the schema and vocabulary
        known = {
            r[0]: _Known(*r[1:]) for r in conn.exec_driver_sql("SELECT path, mtime_ns, size, content_hash, page_id FROM file")
        }
        gone = [p for p in known if p not in on_disk]
        candidates = [
            rel
            for rel, (_, mtime, size) in on_disk.items()
            if force or (k := known.get(rel)) is None or k.page_id is None or (k.mtime_ns, k.size) != (mtime, size)
        ]
        report.unchanged = len(on_disk) - len(candidates)

        parsed: dict[str, tuple[bytes, str]] = {}
        for rel in candidates:
            path, mtime, size = on_disk[rel]
            try:
                raw = read_page(root, rel)  # without following links swapped in since the walk (app/index/pagefile.py)
            except OSError as exc:
                report.diagnostics.append(Diagnostic(rel, 1, "error", f"cannot read file: {exc.strerror}"))
                raw = b""
            digest = hashlib.sha256(raw).hexdigest()
            old = known.get(rel)
            if not force and old is not None and old.page_id is not None and old.content_hash == digest:
                conn.execute(update(FileRow).where(col(FileRow.path) == rel).values(mtime_ns=mtime, size=size))
                report.unchanged += 1
                continue
            parsed[rel] = (raw, digest)

        old_ids = {rel: page_id for rel in gone + list(parsed) if rel in known and (page_id := known[rel].page_id)}
        # Ids held by files that stay as they are: a new page may not take one of them.
        ids = PageIds(  # ids owned by pages not reparsed now
            {row.page_id: rel for rel, row in known.items() if row.page_id is not None and rel not in old_ids and rel in on_disk}
            if parsed
            else {}
        )
        touched = gone + list(parsed)
        # Snippet hashes already indexed (read before the edited pages' rows go): a snippet whose hash is not
        # among them is new code, to be verified (`changed_snippets`). An index-only scan; none on a first index.
        known_hashes = {h for (h,) in conn.exec_driver_sql("SELECT DISTINCT content_hash FROM snippet")} if parsed else set()
        if touched:
            serialize_status_writers(conn)  # no evidence insert judges these snippets meanwhile
        _delete_pages(conn, sorted(set(old_ids.values())))
        for chunk in chunks(touched, 500):
            conn.execute(delete(FileRow).where(col(FileRow.path).in_(chunk)))
            conn.execute(delete(DiagnosticRow).where(col(DiagnosticRow.path).in_(chunk)))
        next_section = (conn.execute(select(func.max(SectionRow.id))).scalar() or 0) + 1
        rows = _Rows()
        pages: list[Page] = []
        failed: set[str] = set()
        written: list[str] = []  # ids of the snippet rows written
        # Pages are checked and their rows written as the parsing workers hand them over (in path order).
        for prep in _prepare_all([(rel, raw, digest) for rel, (raw, digest) in sorted(parsed.items())]):
            page = prep.page
            if page is not None:
                duplicate = ids.claim(page)
                if duplicate is not None:
                    prep.diagnostics.append(duplicate)
                    page = None
            if page is None:
                failed.add(prep.rel)
            else:
                if repo is not None and repo.aliases:
                    page.aliases = page.aliases + repo.aliases_for(page.id, page.aliases)  # data/aliases.yaml merged
                if repo is not None:  # stored with the file's diagnostics: the page and the API show them
                    prep.diagnostics.extend(schema_problems(repo, page))
                pages.append(page)
                next_section = rows.add_page(prep, next_section)
                written += [d["id"] for d in prep.snippets]
                report.changed_snippets += [d["id"] for d in prep.snippets if d["content_hash"] not in known_hashes]
                if len(pages) % INSERT_BATCH == 0:
                    rows.flush(conn)
            report.diagnostics.extend(prep.diagnostics)
        rows.flush(conn)
        if judge is not None:
            judge(conn, written)
        path_to_id = {p.path: p.id for p in pages}
        file_rows = [
            {
                "path": rel,
                "mtime_ns": on_disk[rel][1],
                "size": on_disk[rel][2],
                "content_hash": digest,
                "page_id": path_to_id.get(rel),
            }
            for rel, (_raw, digest) in parsed.items()
        ]
        bulk_insert(conn, FileRow, file_rows)
        diag_rows = [{"path": d.path, "line": d.line, "severity": d.severity, "message": d.message} for d in report.diagnostics]
        bulk_insert(conn, DiagnosticRow, diag_rows)
        # Links can change resolution only where a page appeared or left, or where a page is new.
        changed_ids = sorted(set(old_ids.values()) | {p.id for p in pages})
        # EXISTS, not IN (SELECT …): PostgreSQL then probes page's primary key per link.
        target_exists = exists(select(PageRow.id).where(col(PageRow.id) == LinkRow.target_id))
        if len(changed_ids) > LINK_SWEEP:  # a first or forced index: one pass over every link beats thousands of IN lists
            conn.execute(update(LinkRow).values(resolved=target_exists))
            changed_ids = []
        for chunk in chunks(changed_ids, 500):
            conn.execute(
                update(LinkRow)
                .where(or_(col(LinkRow.target_id).in_(chunk), col(LinkRow.source_id).in_(chunk)))
                .values(resolved=target_exists)
            )

        if touched:
            bump_generation(conn)
        new_ids = {p.id for p in pages}
        previous = set(old_ids.values())
        report.added = sorted(new_ids - previous)
        report.updated = sorted(new_ids & previous)
        report.removed = sorted(previous - new_ids)
        report.failed = sorted(failed)
    report.skipped = skipped  # reported on every reindex, never stored: they are not pages
    if root.is_dir():
        report.diagnostics.extend(links_leaving(root))  # reported on every reindex, never stored: they are not pages
    report.seconds = time.perf_counter() - started
    return report
