"""Fixtures of the queue tests: the service over HTTP on a fresh PostgreSQL database, and worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from queue_fleet import TOKEN, Fleet

from tests.conftest import LiveServer


@pytest.fixture
def qwiki(tmp_path: Path) -> Path:
    wiki = tmp_path / "qwiki"
    wiki.mkdir()
    return wiki


@pytest.fixture
def fleet(postgres_url: str, qwiki: Path, tmp_path: Path) -> Iterator[Fleet]:
    """The service on a fresh PostgreSQL database (index and queue), and room for worker processes."""
    from app.main import create_app
    from app.settings import Settings

    (tmp_path / "evidence").mkdir()
    markers, logs = tmp_path / "markers", tmp_path / "logs"
    markers.mkdir()
    logs.mkdir()
    settings = Settings(
        wiki=qwiki,
        db=postgres_url,
        evidence=tmp_path / "evidence",
        runner_token=TOKEN,
        queue_database_url=postgres_url.replace("+psycopg", ""),
        targets=["sm_90a", "sm_100a"],
        stalled_after_s=3.0,
        worker_heartbeat_s=0.5,
        job_retry_wait_s=1,
    )
    app = create_app(settings)
    with LiveServer(app) as server:
        fleet = Fleet(settings, server.url, app.state.store, markers, logs)
        try:
            yield fleet
        finally:
            fleet.stop()
