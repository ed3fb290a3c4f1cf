"""Database engine and schema: SQLite (default) or PostgreSQL, chosen by URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel, create_engine

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
    return create_engine(url, pool_pre_ping=True)


def search_backend(url: str) -> SearchBackend:
    """The search backend matching the database URL."""
    if is_sqlite(url):
        return SqliteSearch()
    from app.search_pg import PostgresSearch  # only where PostgreSQL is configured

    return PostgresSearch()


def create_schema(engine: Engine, backend: SearchBackend) -> None:
    """Create missing tables and the search index (idempotent)."""
    SQLModel.metadata.create_all(engine)
    with engine.begin() as conn:
        backend.create(conn)
