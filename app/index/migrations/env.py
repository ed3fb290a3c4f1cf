"""Alembic environment: migrations run on the connection `app.index.migrations.upgrade` hands over.

From the command line: `alembic -x url=postgresql+psycopg://… upgrade head`
with `script_location = app/index/migrations` (no alembic.ini is needed in the app).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from app.index.models import SQLModel  # noqa: F401  (target metadata for autogenerate)

target_metadata = SQLModel.metadata


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    run(connection)
else:  # pragma: no cover - the alembic command line
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("alembic: give the database as -x url=… or sqlalchemy.url")
    engine = create_engine(url)
    with engine.begin() as conn:
        run(conn)
    engine.dispose()
