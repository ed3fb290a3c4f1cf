"""One connection per request: 64 concurrent clients over real HTTP get only 2xx, and no request path
checks out a second connection (a pool of one connection would then time out with a 500)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import LiveServer

PATHS = [
    "/api/search?q=tma",
    "/api/search?q=tensr%20memroy",
    "/api/pages",
    "/api/pages?type=hardware",
    "/api/pages/hw-tma",
    "/api/resolve?name=TMA",
    "/api/snippets?limit=20",
    "/api/snippets?status=unknown",
    "/api/graph",
    "/api/graph?page=hw-tma",
    "/api/health",
    "/",
    "/evidence",
    "/graph",
    "/graph?page=hw-tma",
    "/pages/hw-tma",
    "/search?q=tmem",
    "/a/TMEM",
]


def _serve(settings: Any, **pool: Any) -> LiveServer:
    from app.main import create_app

    settings = settings.model_copy(update=pool)
    return LiveServer(create_app(settings))


def test_every_request_path_works_with_a_pool_of_one_connection(settings: Any) -> None:
    """A nested checkout anywhere on a request path would wait for the one pooled connection and time out."""
    with _serve(settings, db_pool_size=1, db_max_overflow=0, db_pool_timeout_s=3.0) as server:
        server.server.config.app.state.warm_done.wait(60)  # the warm-up thread holds a connection meanwhile
        with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as client:
            for path in PATHS:
                response = client.get(path)
                assert response.status_code < 400, (path, response.status_code, response.text[:300])


def test_64_concurrent_clients_get_only_2xx(settings: Any) -> None:
    """Search, pages, resolve, snippets, graph and the HTML views at once, 64 clients, default pool."""
    failures: list[tuple[str, int | str]] = []
    done = [0]
    lock = threading.Lock()
    with _serve(settings) as server:
        start = threading.Barrier(64)

        def client_loop(k: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60, follow_redirects=False) as client:
                start.wait()
                for i in range(6):
                    path = PATHS[(k + i) % len(PATHS)]
                    try:
                        status: int | str = client.get(path).status_code
                    except httpx.HTTPError as exc:
                        status = type(exc).__name__
                    with lock:
                        done[0] += 1
                        if not (isinstance(status, int) and 200 <= status < 400):
                            failures.append((path, status))

        threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert done[0] == 64 * 6
    assert failures == []


def test_pool_settings_cover_the_request_threads(tmp_path: Path) -> None:
    """Size + overflow ≥ anyio's 40 worker threads, so no request waits for a connection."""
    from app.settings import Settings
    from app.store import Store

    settings = Settings(db=f"sqlite:///{tmp_path / 'x.db'}")
    assert settings.db_pool_size + settings.db_max_overflow >= 40
    store = Store(settings.db, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow)
    assert store.engine.pool.size() == settings.db_pool_size
    store.engine.dispose()
