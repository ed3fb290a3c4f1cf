"""Schema migrations (Alembic), run by `app.index.db.create_schema` on SQLite and PostgreSQL alike.

`upgrade(engine)` brings a database to the newest revision. An index made
before migrations existed (tables present, no `alembic_version`) is stamped
with the first revision, which created exactly those tables, and then upgraded.
On PostgreSQL an advisory lock makes service replicas that start together
migrate one after the other.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine

HERE = Path(__file__).resolve().parent
BASELINE = "0001"
LOCK_ID = 0x6B77_6D69  # 'kwmi': pg_advisory_xact_lock key of the migration


def config(connection: Connection) -> Config:
    """An Alembic configuration for this package, bound to an open connection (no alembic.ini)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database behind `engine` to `revision` (idempotent)."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({LOCK_ID})")
        tables = set(inspect(conn).get_table_names())
        cfg = config(conn)
        if "page" in tables and "alembic_version" not in tables:
            command.stamp(cfg, BASELINE)
        command.upgrade(cfg, revision)
