"""Schema migrations (Alembic) on both backends: they build exactly the models' schema, idempotently."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from app.index.db import create_schema, make_engine
from app.index.migrations import BASELINE, HERE, config, upgrade
from app.index.models import SQLModel

SEARCH_TABLES = ("search_",)  # the backends' own full-text tables are not SQLModel tables


def _differences(engine) -> list:  # type: ignore[no-untyped-def]
    def include(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
        table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", "")
        return not str(table or "").startswith(SEARCH_TABLES) and table != "alembic_version"

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": include, "compare_type": True})
        return compare_metadata(ctx, SQLModel.metadata)


def test_migrations_build_the_models_schema_and_run_twice_harmlessly(db_url: str) -> None:
    engine = make_engine(db_url)
    create_schema(engine)
    create_schema(engine)
    assert _differences(engine) == []
    head = ScriptDirectory.from_config(config(None)).get_current_head()  # type: ignore[arg-type]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head
        tables = set(inspect(conn).get_table_names())
    assert {"page", "section", "snippet", "evidence"} <= tables
    assert (
        not {"search_fts", "search_vocab", "search_doc", "search_term"} & tables
    )  # full-text search lives in tantivy (app/search/)
    engine.dispose()


def test_an_index_made_before_migrations_is_adopted(tmp_path: Path) -> None:
    """A SQLite index from before Alembic (the first revision's tables, no alembic_version) is upgraded, not rebuilt."""
    path = tmp_path / "old.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine, BASELINE)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE alembic_version")
        conn.exec_driver_sql("INSERT INTO evidence VALUES ('r', 's', 'p', 't', 'compile', 'pass', 'h', '2026', '{}')")
    create_schema(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM evidence")).scalar() == 1
    assert _differences(engine) == []
    engine.dispose()


def test_service_replicas_that_start_together_migrate_once(postgres_url: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        engine = make_engine(postgres_url)
        try:
            create_schema(engine)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    engine = make_engine(postgres_url)
    assert _differences(engine) == []
    engine.dispose()


def test_the_migration_scripts_are_where_the_package_ships_them() -> None:
    assert (HERE / "env.py").is_file() and list((HERE / "versions").glob("0001_*.py"))
