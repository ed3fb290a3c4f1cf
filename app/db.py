"""Database engine and schema: SQLite (default) or PostgreSQL, chosen by URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import create_engine

from app import models  # noqa: F401  (registers the tables)
from app.search import SearchBackend, SqliteSearch


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL mode so readers never wait for a reindex."""
    if is_sqlite(url):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    engine = create_engine(url, pool_pre_ping=True)
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


def search_backend(url: str) -> SearchBackend:
    """The search backend matching the database URL."""
    if is_sqlite(url):
        return SqliteSearch()
    from app.search_pg import PostgresSearch  # only where PostgreSQL is configured

    return PostgresSearch()


def create_schema(engine: Engine, backend: SearchBackend) -> None:
    """Migrate to the newest schema (idempotent); the migrations also create `backend`'s search tables."""
    from app.migrations import upgrade  # Alembic, imported only where a schema is made

    upgrade(engine)
