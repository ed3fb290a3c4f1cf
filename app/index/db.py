"""Database engine and schema: SQLite (default) or PostgreSQL, chosen by URL."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import create_engine

from app.index import models  # noqa: F401  (registers the tables)

T = TypeVar("T")


GENERATION_SQL = "SELECT value FROM index_state WHERE key = 'generation'"
INSTANCE_SQL = "SELECT value FROM index_state WHERE key = 'instance'"
DATA_STATE_KEY = "data_files"
"""index_state's key for what every page's rows were made from besides its file (app.index.build `data_files_digest`)."""
ROWS_BASIS_SQL = f"SELECT value FROM index_state WHERE key = '{DATA_STATE_KEY}'"


def index_generation(conn: Connection) -> int | None:
    """The index generation (grows with every reindex that changed something; None before the first).

    Plain SQL on the DBAPI cursor: searches ask this often, and SQLAlchemy's statement
    execution costs more than the query.
    """
    return _scalar(conn, GENERATION_SQL)


def rows_basis(conn: Connection) -> int | None:
    """What every page's rows were made from besides its file, as the last reindex recorded it (the data files and the
    rows version: app.index.build `data_files_digest`); None before one. When it moves, every page was reparsed."""
    return _scalar(conn, ROWS_BASIS_SQL)


def _scalar(conn: Connection, sql: str) -> Any:
    """The first column of the first row of `sql` (no parameters) on the DBAPI cursor, or None for no row."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql)
        row = cursor.fetchone()
    finally:
        cursor.close()
    return row[0] if row else None


@contextmanager
def connected(engine: Engine, conn: Connection | None = None) -> Iterator[Connection]:
    """`conn` itself when given (a request's connection), else a connection of `engine`'s own (CLI, MCP, tests).

    Request paths always pass their one connection down, so no request ever holds two.
    """
    if conn is not None:
        yield conn
        return
    with engine.connect() as own:
        yield own


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


POOL_SIZE, MAX_OVERFLOW, POOL_TIMEOUT_S = 8, 40, 30.0
"""Connections kept open, extra ones allowed under load, and the wait for one. One request holds one
connection, so size + overflow ≥ the threads that serve requests (anyio's default: 40) means no request waits."""


def make_engine(
    url: str, pool_size: int | None = None, max_overflow: int | None = None, pool_timeout: float | None = None
) -> Engine:
    """An engine for `url`; SQLite gets WAL mode so readers never wait for a reindex."""
    pool = {
        "pool_size": POOL_SIZE if pool_size is None else pool_size,
        "max_overflow": MAX_OVERFLOW if max_overflow is None else max_overflow,
        "pool_timeout": POOL_TIMEOUT_S if pool_timeout is None else pool_timeout,
    }
    if is_sqlite(url):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        else:
            pool = {}  # an in-memory database lives in one connection per thread (SingletonThreadPool)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **pool)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    engine = create_engine(url, pool_pre_ping=True, **pool)
    event.listen(engine, "before_cursor_execute", _without_nul, retval=True)
    return engine


def _without_nul(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> tuple[str, Any]:
    """PostgreSQL text cannot hold NUL: send U+FFFD instead, so a NUL in user input matches nothing instead of failing."""
    return statement, _scrub(parameters)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(v) for v in value)
    return value


def chunks(items: list[T], size: int) -> list[list[T]]:
    """`items` in batches of `size`: SQL statements take a bounded number of parameters."""
    return [items[i : i + size] for i in range(0, len(items), size)]


STATUS_WRITERS_LOCK = 260009
"""The PostgreSQL advisory lock that a reindex and an evidence insert each hold for their transaction."""


def serialize_status_writers(conn: Connection) -> None:
    """Make this transaction wait for any other reindex or evidence insert (PostgreSQL; SQLite has one writer anyway).

    Both write stored snippet statuses from what they read (app/evidence/store.py `refresh_statuses`): an
    evidence insert that ran beside a reindex could judge snippet rows the reindex was replacing, and the
    reindex judge its new rows without that evidence. Held until commit; a reindex of changed pages takes
    well under a second, a first index of a large wiki longer (evidence posts wait meanwhile).
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({STATUS_WRITERS_LOCK})")


def bulk_insert(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Insert many rows (every row with the same keys) with `insert_rows`."""
    if not rows:
        return
    columns = tuple(rows[0])
    values = itemgetter(*columns) if len(columns) > 1 else lambda r: (r[columns[0]],)  # a tuple either way
    insert_rows(conn, table, columns, [values(r) for r in rows])


def copy_text(rows: list[tuple[Any, ...]]) -> bytes:
    """`rows` in PostgreSQL's COPY text format (UTF-8): one line a row, values by tab, NULL as \\N.

    Made by the index's parse workers, so the process that holds the transaction only streams bytes.
    Every column is text, a number or a boolean.
    """
    lines: list[str] = []
    for row in rows:
        fields: list[str] = []
        for v in row:
            if v is None:
                fields.append("\\N")
            elif v is True or v is False:
                fields.append("t" if v else "f")
            elif isinstance(v, str):  # what the format escapes (backslash, tab, newline, return); NUL as `_without_nul` sends it
                fields.append(
                    v.replace("\\", "\\\\")
                    .replace("\t", "\\t")
                    .replace("\n", "\\n")
                    .replace("\r", "\\r")
                    .replace("\x00", "\ufffd")
                )
            else:
                fields.append(str(v))
        lines.append("\t".join(fields))
    lines.append("")
    return "\n".join(lines).encode()


def insert_rows(conn: Connection, table: Any, columns: tuple[str, ...], rows: list[tuple[Any, ...]] | bytes) -> None:
    """Insert `rows` (tuples in `columns` order; on PostgreSQL also `copy_text` bytes) in one statement.

    COPY FROM STDIN on PostgreSQL (the rows streamed, not one round trip per batch), the driver's
    executemany of plain tuples on SQLite: SQLAlchemy's per-row parameter processing cost about as much
    as SQLite's own work (a full index inserts ~130,000 rows at 10,000 pages). Text reaches PostgreSQL
    scrubbed of NUL as `_without_nul` does.
    """
    if not rows:
        return
    name = table.__tablename__
    if conn.dialect.name == "postgresql":
        data = rows if isinstance(rows, bytes) else copy_text(rows)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            with cursor.copy(f"COPY {name} ({', '.join(columns)}) FROM STDIN") as copy:
                copy.write(data)
        finally:
            cursor.close()
        return
    if isinstance(rows, bytes):
        raise TypeError("COPY text is for PostgreSQL; SQLite takes tuples")
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    for chunk in chunks(rows, 5000):
        conn.exec_driver_sql(sql, chunk)


def create_schema(engine: Engine) -> None:
    """Migrate to the newest schema (idempotent) and give the database its `instance` number once."""
    from app.index.migrations import upgrade  # Alembic, imported only where a schema is made

    upgrade(engine)
    # A random number drawn once per database: what tells a database made anew at the same place (its generations
    # count from 1 again) from the one before it, for files kept beside it (app/agents/cache.py). 31 bits:
    # index_state holds 32-bit integers. Two writers starting at once: the second insert fails, the first one stands.
    with engine.connect() as conn:
        if _scalar(conn, INSTANCE_SQL) is not None:
            return
    with contextlib.suppress(IntegrityError), engine.begin() as conn:
        conn.execute(text("INSERT INTO index_state (key, value) VALUES ('instance', :v)"), {"v": secrets.randbits(31) or 1})


def index_instance(conn: Connection) -> int | None:
    """The database's instance number (`create_schema`), or None for an index no writer has opened since it was added."""
    return _scalar(conn, INSTANCE_SQL)
