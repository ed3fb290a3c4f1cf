"""Shared fixtures: a copy of the fixture wiki, an index on each backend, the app over real HTTP."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.proc import free_port
from tests.ci import is_ci

FIXTURE_WIKI = Path(__file__).parent / "fixtures" / "wiki"
REPO = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get("KERNELWIKI_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def wiki_dir(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/wiki."""
    target = tmp_path / "wiki"
    shutil.copytree(FIXTURE_WIKI, target)
    return target


def _postgres_available() -> str | None:
    """None when a PostgreSQL server answers, else why not."""
    try:
        import psycopg  # noqa: F401
        from sqlalchemy import create_engine, text

        engine = create_engine(PG_ADMIN_URL)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any failure to connect means 'not available'
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """The PostgreSQL admin URL; skip where there is none, but fail in CI (CI=true)."""
    problem = _postgres_available()
    if problem is not None:
        if is_ci():
            pytest.fail(f"PostgreSQL is required in CI but not reachable at {PG_ADMIN_URL}: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {problem}")
    return PG_ADMIN_URL


# The catalog rows a database holds besides its user's objects: what a fresh CREATE DATABASE starts with.
# Compared before a database is handed out again, so "fresh and empty" is checked rather than assumed.
_CATALOG_FINGERPRINT = """
SELECT (SELECT array_agg(nspname::text ORDER BY nspname) FROM pg_namespace
        WHERE nspname NOT LIKE 'pg_temp_%' AND nspname NOT LIKE 'pg_toast_temp_%'),
       (SELECT count(*) FROM pg_class), (SELECT count(*) FROM pg_proc), (SELECT count(*) FROM pg_type),
       (SELECT count(*) FROM pg_extension), (SELECT count(*) FROM pg_event_trigger),
       (SELECT count(*) FROM pg_largeobject_metadata), (SELECT count(*) FROM pg_publication),
       (SELECT count(*) FROM pg_default_acl), (SELECT count(*) FROM pg_constraint),
       (SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
        WHERE d.datname = current_database()),
       (SELECT nspacl::text FROM pg_namespace WHERE nspname = 'public'),
       (SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'public')
"""


class PostgresDatabases:
    """Fresh, empty databases for tests, recycled instead of dropped (one pool per xdist worker).

    CREATE DATABASE and DROP DATABASE (which forces a checkpoint) cost 1 to 4 s a test on the shared
    2-core machine. A database a test has finished with is wiped instead: every connection to it is
    ended, it is renamed (a process the test leaked can no longer reach it, and the next test gets a
    name, URL and full-text folder of its own), its schemas, large objects and settings are dropped and
    the public schema is made again as PostgreSQL makes it; it is handed out again only when its
    catalog then matches a brand-new database's (else it is dropped and a new one created).
    """

    def __init__(self, admin_url: str) -> None:
        from sqlalchemy import create_engine

        self.admin_url = admin_url
        self.admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.free: list[str] = []
        self.pristine: tuple[object, ...] | None = None

    def url(self, name: str) -> str:
        return self.admin_url.rsplit("/", 1)[0] + "/" + name

    def _admin(self, sql: str, **params: object) -> None:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            conn.execute(text(sql), params)

    def _fingerprint(self, name: str) -> tuple[object, ...]:
        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        engine = create_engine(self.url(name), poolclass=NullPool)
        try:
            with engine.connect() as conn:
                row = conn.execute(text(_CATALOG_FINGERPRINT)).one()
        finally:
            engine.dispose()
        return tuple(row)

    def take(self) -> str:
        """A fresh, empty database's name (new, or a wiped one renamed)."""
        name = f"kw_test_{uuid.uuid4().hex[:12]}"
        if self.free:
            self._admin(f'ALTER DATABASE "{self.free.pop()}" RENAME TO "{name}"')
            return name
        self._admin(f'CREATE DATABASE "{name}"')
        if self.pristine is None:
            self.pristine = self._fingerprint(name)
        return name

    def give_back(self, name: str) -> None:
        """End the test's connections, wipe the database and keep it for the next test (or drop it)."""
        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        deadline = time.monotonic() + 30
        with self.admin.connect() as conn:
            while True:  # pg_terminate_backend only signals: wait for the sessions to be gone
                left = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = :n AND pid <> pg_backend_pid()"
                    ),
                    {"n": name},
                ).scalar_one()
                if not left or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        wiped = f"kw_test_{uuid.uuid4().hex[:12]}"
        try:
            self._admin(f'ALTER DATABASE "{name}" RENAME TO "{wiped}"')
            self._admin(f'ALTER DATABASE "{wiped}" RESET ALL')
            engine = create_engine(self.url(wiped), poolclass=NullPool, isolation_level="AUTOCOMMIT")
            try:
                with engine.connect() as conn:
                    schemas = conn.execute(
                        text(
                            "SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') "
                            "AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%'"
                        )
                    ).scalars()
                    for schema in list(schemas):
                        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
                    for event_trigger in list(conn.execute(text("SELECT evtname FROM pg_event_trigger")).scalars()):
                        conn.execute(text(f'DROP EVENT TRIGGER "{event_trigger}"'))
                    for publication in list(conn.execute(text("SELECT pubname FROM pg_publication")).scalars()):
                        conn.execute(text(f'DROP PUBLICATION "{publication}"'))
                    conn.execute(text("SELECT lo_unlink(oid) FROM pg_largeobject_metadata"))
                    conn.execute(text("CREATE SCHEMA public AUTHORIZATION pg_database_owner"))
                    conn.execute(text("GRANT USAGE ON SCHEMA public TO PUBLIC"))
                    conn.execute(text("COMMENT ON SCHEMA public IS 'standard public schema'"))
            finally:
                engine.dispose()
            if self._fingerprint(wiped) == self.pristine:
                self.free.append(wiped)
                return
        except Exception:  # noqa: BLE001 - anything unexpected: drop it, as before the pool
            wiped = name if not self._exists(wiped) else wiped
        self._admin(f'DROP DATABASE IF EXISTS "{wiped}" WITH (FORCE)')

    def _exists(self, name: str) -> bool:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            return conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is not None

    def close(self) -> None:
        for name in self.free:
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.free.clear()
        self.admin.dispose()


@pytest.fixture(scope="session")
def postgres_databases(postgres_admin_url: str) -> Iterator[PostgresDatabases]:
    pool = PostgresDatabases(postgres_admin_url)
    yield pool
    pool.close()


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, wiped (or dropped) afterwards."""
    name = postgres_databases.take()
    url = postgres_databases.url(name)
    yield url
    postgres_databases.give_back(name)
    from app.search import search_dir_for

    search_dir = search_dir_for(url)
    if search_dir is not None:
        shutil.rmtree(search_dir, ignore_errors=True)  # the database's full-text index folder (.kernelwiki/search/…)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The index URL, once per backend: the shared suite runs against both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'index.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(db_url: str, wiki_dir: Path):  # type: ignore[no-untyped-def]
    """An index of the fixture wiki."""
    from app.store import Store

    s = Store(db_url)
    s.create_schema()
    s.reindex(wiki_dir)
    yield s
    s.engine.dispose()


@contextmanager
def module_database(request: pytest.FixtureRequest, folder: Path) -> Iterator[str]:
    """The index URL of a module-scoped fixture, per its backend param: SQLite in `folder`, or a pooled PostgreSQL
    database that is wiped and given back (with its full-text folder removed) when the module is done."""
    from app.search import search_dir_for

    if request.param == "sqlite":
        yield f"sqlite:///{folder / 'index.db'}"
        return
    pool: PostgresDatabases = request.getfixturevalue("postgres_databases")
    name = pool.take()
    url = pool.url(name)
    try:
        yield url
    finally:
        pool.give_back(name)
        search_dir = search_dir_for(url)
        if search_dir is not None:
            shutil.rmtree(search_dir, ignore_errors=True)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """`store`, once per backend for a module's tests that only read (the hostile strings, the read-only searches and
    lookups), instead of a schema and an index per test. A test that damaged the index would fail the tests after it."""
    from app.store import Store

    folder = tmp_path_factory.mktemp("shared-store")
    shutil.copytree(FIXTURE_WIKI, folder / "wiki")
    with module_database(request, folder) as url:
        s = Store(url)
        try:
            s.create_schema()
            s.reindex(folder / "wiki")
            yield s
        finally:
            s.engine.dispose()


class LiveServer:
    """The app served by uvicorn on a free local port, in a thread."""

    def __init__(self, app: object) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        status = getattr(getattr(self.server.config.app, "state", None), "index_status", None)
        if status is not None and not status.ready.wait(60):  # the app listens at once and indexes in the background
            raise RuntimeError("the test server did not finish its first index")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def settings(db_url: str, wiki_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.settings import Settings

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    return Settings(wiki=wiki_dir, db=db_url, evidence=evidence, runner_token="test-runner-token")


@pytest.fixture
def live(settings):  # type: ignore[no-untyped-def]
    """The app over real HTTP; yields an httpx client bound to it."""
    import httpx

    from app.main import create_app

    with LiveServer(create_app(settings)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            client.server = server  # type: ignore[attr-defined]
            yield client


@pytest.fixture(scope="module")
def shared_wiki_source() -> Path:
    """The wiki `shared_live` copies and serves: the fixture wiki, unless a module overrides this fixture."""
    return FIXTURE_WIKI


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, shared_wiki_source: Path
) -> Iterator[Any]:
    """`live`, once per backend (and xdist worker) for a module's tests that only read or are refused (hostile queries,
    malformed posts, the search route's answers): one server start and one index of the fixture wiki instead of one
    per test. A test that damaged the index, or stored what it should have refused, shows in the tests after it."""
    import httpx

    from app.main import create_app
    from app.settings import Settings

    folder = tmp_path_factory.mktemp("shared-live")
    shutil.copytree(shared_wiki_source, folder / "wiki")
    (folder / "evidence").mkdir()
    with module_database(request, folder) as url:
        settings = Settings(wiki=folder / "wiki", db=url, evidence=folder / "evidence", runner_token="test-runner-token")
        with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            client.server = server  # type: ignore[attr-defined]
            yield client
