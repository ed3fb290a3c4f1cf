"""Indexing: wiki folder → SQL index, incrementally and atomically.

Only files whose size, mtime or content changed are parsed again; files that
disappeared leave the index. The whole reindex is one transaction, so readers
(WAL mode on SQLite, MVCC on PostgreSQL) see either the old index or the new
one, never a half-built one. Files with errors are retried on every reindex,
because their problem may lie in another file (a duplicate id).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import delete, exists, insert, or_, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col, select

from app.index.db import (
    DATA_STATE_KEY,
    bulk_insert,
    chunks,
    copy_text,
    index_generation,
    insert_rows,
    serialize_status_writers,
)
from app.index.markdown import first_sentence, outline
from app.index.models import (
    AliasRow,
    ArchitectureRow,
    DiagnosticRow,
    EvidenceRow,
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
from app.index.page_rows import COLUMNS, ROWS_VERSION, TABLES, FreshJudge, page_rows
from app.index.pagefile import read_page
from app.index.pages import links_leaving, schema_problems
from app.lifeline import exit_with
from snippets.diagnostic import Diagnostic
from snippets.page import PageIds, inside, parse_page
from snippets.repository import Repository, folder_not_pages, name_not_a_page, open_repository, skill_folders

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
RECORDED_SWEEP = 5000
"""Snippets written beyond which a reindex reads every recorded snippet id in one scan rather than probing them."""
LZ4_SQL = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
"""Whether the PostgreSQL server can compress stored text with LZ4 (NULL before PostgreSQL 14)."""
INSERT_BATCH = 500
"""Pages whose rows are collected before they are written (one executemany or COPY per table)."""
ANALYZE_AFTER = 1000
"""Pages written or removed beyond which a PostgreSQL reindex refreshes the planner's statistics of the tables
listings and filters read (`ANALYZED`) before it commits: right after a first index the planner took 10,000
pages for 22 (no statistics until autovacuum comes by), and `/?arch=sm90` walked the primary key 7,441 times."""
ANALYZED = "page, alias, tag, language, architecture, facet, link, snippet, snippet_target, performance_claim"
"""Pages whose rows are collected before they are written (one executemany or COPY per table)."""


@dataclass
class IndexReport:
    """What a reindex did."""

    added: list[str] = field(default_factory=list)  # page ids new to the index
    updated: list[str] = field(default_factory=list)  # page ids whose file changed
    removed: list[str] = field(default_factory=list)  # page ids that left the index
    unchanged: int = 0  # files skipped because nothing changed
    failed: list[str] = field(default_factory=list)  # paths of files with errors (not indexed)
    indexed_with_errors: list[str] = field(default_factory=list)  # paths of files indexed despite error findings (schema, blocks)
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


@dataclass(frozen=True)
class Setting:
    """What a parse worker needs besides the file: given once to each worker of a pool (its initializer)."""

    root: str  # the wiki folder, real path
    repo: Repository | None  # its layout and data files (aliases merged, schema checked), when it has them
    copy: bool  # rows as PostgreSQL COPY text (bytes) rather than tuples (SQLite)
    judge: FreshJudge | None = None  # the status of a snippet without evidence, written with its row


class Task(NamedTuple):
    """One file to prepare: its bytes when the parent read them already (to compare hashes), else None."""

    rel: str  # path relative to the wiki root
    raw: bytes | None
    digest: str | None  # sha256 of `raw`


@dataclass
class Prepared:
    """A file read, parsed and turned into rows: the CPU-heavy part, done in worker processes.

    Small to send back: the parent checks the page's id against the others', writes the rows and
    records the file; it never sees the page itself.
    """

    rel: str  # path relative to the wiki root
    digest: str  # sha256 of the file's bytes
    page_id: str | None  # None when the file has errors
    id_line: int  # file line of the page's id (for a duplicate-id error)
    diagnostics: list[Diagnostic]
    schema: list[Diagnostic] = field(default_factory=list)  # the repository schema's findings: kept if the page keeps its id
    snippets: list[tuple[str, str]] = field(default_factory=list)  # (snippet id, content hash) of every block
    rows: dict[str, list[tuple[Any, ...]] | bytes] = field(default_factory=dict)  # table name → rows (app/index/page_rows.py)


_SETTING: list[Setting] = []
"""A parse worker's `Setting` (set by `_start_worker`)."""


def _start_worker(parent: int, setting: Setting) -> None:
    exit_with(parent)  # each worker ends with the indexing process, even when that is killed (app/lifeline.py)
    _SETTING[:] = [setting]


def prepare(task: Task, setting: Setting | None = None) -> Prepared:
    """Read (unless the parent did), parse, outline and extract one file, and make its rows.

    Pure but for reading the file: safe to run in another process. One Markdown parse per page
    (`outline`): the sections, the description and the code blocks all come from its tokens.
    """
    setting = setting or _SETTING[0]
    diags: list[Diagnostic] = []
    raw, digest = task.raw, task.digest
    if raw is None:
        try:
            raw = read_page(setting.root, task.rel)  # without following links swapped in since the walk (app/index/pagefile.py)
        except OSError as exc:
            diags.append(Diagnostic(task.rel, 1, "error", f"cannot read file: {exc.strerror}"))
            raw = b""
        digest = hashlib.sha256(raw).hexdigest()
    assert digest is not None
    page, parse_diags = parse_page(raw, task.rel)
    diags += parse_diags
    if page is None:
        return Prepared(task.rel, digest, None, 1, diags)
    repo = setting.repo
    schema: list[Diagnostic] = []
    if repo is not None:
        merged = repo.aliases_for(page.id, page.type, page.title, page.aliases)  # data/aliases.yaml's, with their ranks
        if merged:
            page.aliases = page.aliases + [name for name, _rank in merged]
            page.alias_ranks = dict(merged)
        schema = schema_problems(repo, page)  # stored with the file's diagnostics: the page and the API show them
    parsed = outline(page.body)
    found: list[dict[str, Any]] = []
    if "```" in page.body or "~~~" in page.body:
        from snippets.extract import extract_snippets

        snips, problems = extract_snippets(
            page.id, page.path, page.body, page.body_line, page.architectures, tokens=parsed.tokens
        )
        found = [s.to_dict() for s in snips]
        diags += problems
    rows = page_rows(page, parsed, found, first_sentence(parsed.tokens), setting.judge)
    return Prepared(
        task.rel,
        digest,
        page.id,
        page.line_of("id"),
        diags,
        schema,
        [(d["id"], d["content_hash"]) for d in found],
        {name: copy_text(r) for name, r in rows.items() if r} if setting.copy else {n: r for n, r in rows.items() if r},
    )


def _prepare_all(tasks: list[Task], setting: Setting) -> Iterator[Prepared]:
    """Prepare files in order, across processes when there are many (a full index of a large wiki).

    A generator: each result is handed on as soon as its batch is parsed, so the caller inserts the first
    pages while the workers parse the rest (parsing and inserting overlap).
    """
    workers = os.cpu_count() or 1
    if len(tasks) < PARALLEL_THRESHOLD or workers < 2:
        yield from (prepare(task, setting) for task in tasks)
        return
    # Never fork: a child could inherit a lock some other thread held mid-step, and not every thread is
    # Python's to count (the server's, and native ones such as the search engine's). forkserver starts
    # children from a clean single-threaded server (it re-imports the caller's __main__, which every entry
    # point guards); its start-up is paid once per pool, and only for a wiki of PARALLEL_THRESHOLD files.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["app.index.build"])  # imported once in the server, not once per child
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start_worker, initargs=(os.getpid(), setting))
    try:
        yield from pool.map(prepare, tasks, chunksize=PARSE_BATCH)
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
    """Rows of every table, collected for a batch of pages and written in one statement a table."""

    def __init__(self) -> None:
        self.by_table: dict[str, list[Any]] = {name: [] for name in TABLES}

    def add(self, prep: Prepared) -> None:
        for name, rows in prep.rows.items():
            if isinstance(rows, bytes):
                self.by_table[name].append(rows)
            else:
                self.by_table[name] += rows

    def flush(self, conn: Connection) -> None:
        for name, rows in self.by_table.items():
            if rows:
                table = TABLES[name]
                insert_rows(conn, table, COLUMNS[table], b"".join(rows) if isinstance(rows[0], bytes) else rows)
                rows.clear()


def _recorded(conn: Connection, snippet_ids: list[str]) -> list[str]:
    """Those of `snippet_ids` that some evidence record names: probed by index for an edit's few snippets,
    one scan of the evidence's snippet ids for a large reindex (a first index: 50,000 at 100,000 pages)."""
    if len(snippet_ids) > RECORDED_SWEEP:
        recorded = {sid for (sid,) in conn.exec_driver_sql("SELECT DISTINCT snippet_id FROM evidence")}
    else:
        recorded = set()
        for chunk in chunks(snippet_ids, 500):
            recorded.update(
                conn.execute(select(EvidenceRow.snippet_id).where(col(EvidenceRow.snippet_id).in_(chunk)).distinct()).scalars()
            )
    return [sid for sid in snippet_ids if sid in recorded]


def _copies_text(conn: Connection) -> bool:
    """Whether the workers make COPY text for `conn` (PostgreSQL talking UTF-8, what `copy_text` writes)."""
    if conn.dialect.name != "postgresql":
        return False
    return bool(conn.connection.dbapi_connection.info.encoding == "utf-8")  # type: ignore[union-attr]


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

    def why_not_pages(prefix: str) -> str | None:  # once per folder: a template folder, an agent skill bundle
        return folder_not_pages(prefix.rstrip("/")) or next(
            (f"part of the agent skill bundle {s}/, not a page" for s in skills if prefix.startswith(s + "/")), None
        )

    stack = [(root / top if top else root, top + "/" if top else "") for top in folders]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            if not os.path.isdir(root):  # the wiki folder itself went away mid-reindex: fail rather than drop every page
                raise
            continue
        folder_reason = why_not_pages(prefix)
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), prefix + name + "/"))
            elif name.endswith(".md") and entry.is_file():
                if entry.is_symlink() and not inside(os.path.realpath(entry.path), real_root):
                    continue
                rel = prefix + name
                reason = name_not_a_page(name) or folder_reason
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


def data_files_digest(root: Path) -> int:
    """A number for the contents of the root's data files (a missing file counts as such) and `ROWS_VERSION`: what every
    page's rows depend on besides its own file. 28 bits of a SHA-256 (index_state holds 32-bit integers)."""
    digest = hashlib.sha256(f"rows {ROWS_VERSION}\0".encode())
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


def reindex(
    engine: Engine, root: Path, force: bool = False, judge: Judge | None = None, fresh: FreshJudge | None = None
) -> IndexReport:
    """Bring the index in line with the wiki folder in one transaction (app.search follows it by generation).

    `judge` is given the ids of the snippet rows written (new or edited pages), so their stored statuses
    follow the code they now hold (records of older code turn stale) in the same transaction. With `fresh`,
    the parse workers write each snippet's status without evidence with its row, and `judge` is given
    only the snippets that some record names (none on a first index: the evidence is loaded after it).
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
        cursor = conn.connection.cursor()  # the DBAPI's own rows: SQLAlchemy's Row costs more than the query at 100,000 files
        try:
            cursor.execute("SELECT path, mtime_ns, size, content_hash, page_id FROM file")
            known = {r[0]: _Known(r[1], r[2], r[3], r[4]) for r in cursor.fetchall()}
        finally:
            cursor.close()
        gone = [p for p in known if p not in on_disk]
        candidates = [
            rel
            for rel, (_, mtime, size) in on_disk.items()
            if force or (k := known.get(rel)) is None or k.page_id is None or (k.mtime_ns, k.size) != (mtime, size)
        ]
        report.unchanged = len(on_disk) - len(candidates)

        # A file the index knows as a page is read here, to tell an edit from a touch (same bytes, new mtime);
        # the others (all of them on a first or forced index) are read by the parse workers.
        tasks: list[Task] = []
        for rel in candidates:
            path, mtime, size = on_disk[rel]
            old = known.get(rel)
            if force or old is None or old.page_id is None:
                tasks.append(Task(rel, None, None))
                continue
            try:
                raw = read_page(root, rel)  # without following links swapped in since the walk (app/index/pagefile.py)
            except OSError:
                tasks.append(Task(rel, None, None))  # the worker tries again and reports why it cannot
                continue
            digest = hashlib.sha256(raw).hexdigest()
            if old.content_hash == digest:
                conn.execute(update(FileRow).where(col(FileRow.path) == rel).values(mtime_ns=mtime, size=size))
                report.unchanged += 1
                continue
            tasks.append(Task(rel, raw, digest))

        reparsed = [task.rel for task in tasks]
        old_ids = {rel: page_id for rel in gone + reparsed if rel in known and (page_id := known[rel].page_id)}
        # Ids held by files that stay as they are: a new page may not take one of them.
        ids = PageIds(  # ids owned by pages not reparsed now
            {row.page_id: rel for rel, row in known.items() if row.page_id is not None and rel not in old_ids and rel in on_disk}
            if tasks
            else {}
        )
        touched = gone + reparsed
        # Snippet hashes already indexed (read before the edited pages' rows go): a snippet whose hash is not
        # among them is new code, to be verified (`changed_snippets`). An index-only scan; none on a first index.
        known_hashes = {h for (h,) in conn.exec_driver_sql("SELECT DISTINCT content_hash FROM snippet")} if tasks else set()
        if touched:
            serialize_status_writers(conn)  # no evidence insert judges these snippets meanwhile
        _delete_pages(conn, sorted(set(old_ids.values())))
        for chunk in chunks(touched, 500):
            conn.execute(delete(FileRow).where(col(FileRow.path).in_(chunk)))
            conn.execute(delete(DiagnosticRow).where(col(DiagnosticRow.path).in_(chunk)))
        rows = _Rows()
        kept: dict[str, str] = {}  # path → id of every page written
        failed: set[str] = set()
        written: list[str] = []  # ids of the snippet rows written
        file_rows: list[tuple[Any, ...]] = []
        setting = Setting(os.path.realpath(root), repo, _copies_text(conn), fresh)
        # Pages are checked and their rows written as the parsing workers hand them over (in path order).
        for prep in _prepare_all(sorted(tasks), setting):
            page_id = prep.page_id
            if page_id is not None:
                duplicate = ids.claim_id(page_id, prep.rel, prep.id_line)
                if duplicate is not None:
                    prep.diagnostics.append(duplicate)
                    page_id = None
            if page_id is None:
                failed.add(prep.rel)
            else:
                prep.diagnostics += prep.schema
                kept[prep.rel] = page_id
                if any(d.severity == "error" for d in prep.diagnostics):
                    report.indexed_with_errors.append(prep.rel)
                rows.add(prep)
                written += [sid for sid, _ in prep.snippets]
                report.changed_snippets += [sid for sid, h in prep.snippets if h not in known_hashes]
                if len(kept) % INSERT_BATCH == 0:
                    rows.flush(conn)
            _, mtime, size = on_disk[prep.rel]
            file_rows.append((prep.rel, mtime, size, prep.digest, page_id))
            report.diagnostics.extend(prep.diagnostics)
        rows.flush(conn)
        if judge is not None and fresh is not None and written:
            judge(conn, _recorded(conn, written))
        elif judge is not None:
            judge(conn, written)
        insert_rows(conn, FileRow, ("path", "mtime_ns", "size", "content_hash", "page_id"), file_rows)
        diag_rows = [{"path": d.path, "line": d.line, "severity": d.severity, "message": d.message} for d in report.diagnostics]
        bulk_insert(conn, DiagnosticRow, diag_rows)
        # Links can change resolution only where a page appeared or left, or where a page is new.
        changed_ids = sorted(set(old_ids.values()) | set(kept.values()))
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
        if conn.dialect.name == "postgresql" and len(touched) > ANALYZE_AFTER:
            conn.exec_driver_sql(f"ANALYZE {ANALYZED}")  # sees this transaction's rows; the statistics count from the commit
        new_ids = set(kept.values())
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
