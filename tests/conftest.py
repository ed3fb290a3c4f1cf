"""Shared fixtures: a copy of the fixture wiki, an index on each backend, the app over real HTTP."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"kw_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = postgres_admin_url.rsplit("/", 1)[0] + "/" + name
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
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
