"""The shared fixtures' own promises: a recycled PostgreSQL database is as fresh and empty as a new one."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.conftest import PostgresDatabases

pytestmark = pytest.mark.postgres


def test_a_recycled_database_is_empty_renamed_and_unreachable_under_its_old_name(postgres_admin_url: str) -> None:
    pool = PostgresDatabases(postgres_admin_url)
    try:
        first = pool.take()
        engine = create_engine(pool.url(first))
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
            conn.execute(text("CREATE TABLE kept (x int PRIMARY KEY)"))
            conn.execute(text("CREATE SCHEMA other"))
            conn.execute(text("CREATE TYPE other.mood AS ENUM ('ok')"))
            conn.execute(text("SELECT lo_create(0)"))
        leaked = engine.connect()  # a connection the test forgot: ended, not waited for
        leaked.execute(text("SELECT 1"))
        pool.give_back(first)
        assert len(pool.free) == 1, "a wiped database is kept for the next test"

        second = pool.take()
        assert second != first and pool.free == []
        assert pool._fingerprint(second) == pool.pristine
        fresh = create_engine(pool.url(second))
        with fresh.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar_one() == 0
            assert conn.execute(text("SELECT extname FROM pg_extension")).scalars().all() == ["plpgsql"]
            conn.execute(text("CREATE TABLE kept (x int PRIMARY KEY)"))  # the public schema takes new tables again
            conn.commit()
        fresh.dispose()
        gone = create_engine(pool.url(first))
        with pytest.raises(OperationalError, match="does not exist"):
            with gone.connect():
                pass
        gone.dispose()
        leaked.invalidate()  # its session was ended by the wipe: nothing to roll back
        leaked.close()
        engine.dispose()
        pool.give_back(second)
    finally:
        pool.close()
    admin = create_engine(postgres_admin_url)
    with admin.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": second}).scalar_one() == 0
    admin.dispose()
