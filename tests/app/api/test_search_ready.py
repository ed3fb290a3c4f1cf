"""A search never holds up the event loop: while the full-text index is built, every other request is answered."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer


def test_while_the_full_text_index_is_built_views_answer_and_a_search_is_a_503_with_retry_after(
    settings,
    wiki_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    import app.deps
    import app.search.searcher
    from app.main import create_app
    from app.search import SearchEngine
    from app.search.folder import HostFolder
    from app.store import Store

    monkeypatch.setattr(app.deps, "CATCH_UP_WAIT_S", 0.5)
    monkeypatch.setattr(app.search.searcher, "CATCH_UP_WAIT_S", 0.5)
    folder = tmp_path / "search"
    store = Store(settings.db, search_engine=SearchEngine(directory=folder))
    store.create_schema()
    store.reindex(wiki_dir, full_text=False)  # SQL only, as `kernelwiki index` leaves it: the full-text index is to build
    building = threading.Event()
    release = threading.Event()

    def build_slowly() -> None:  # the host lock, held as a long build holds it (the process's first sync waits on it)
        with HostFolder(folder).locked():
            building.set()
            release.wait(60)

    holder = threading.Thread(target=build_slowly, daemon=True)
    holder.start()
    assert building.wait(10)
    try:
        with LiveServer(create_app(settings, store=store)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            started = time.monotonic()
            for path in ("/api/pages", "/api/pages?type=hardware", "/api/snippets", "/evidence", "/pages/hw-tma"):
                assert client.get(path, headers={"accept": "text/html"}).status_code == 200, path
            for path in ("/api/search?q=tma", "/api/search?q=tma&type=hardware", "/api/search?q=tma&budget_tokens=500"):
                answer = client.get(path)
                assert answer.status_code == 503 and answer.headers["retry-after"] == "5", (path, answer.text)
                error = answer.json()["error"]
                assert error["status"] == 503 and "full-text index is being built" in error["detail"], path
            page = client.get("/search", params={"q": "tma"}, headers={"accept": "text/html"})
            assert page.status_code == 503 and "being built" in page.text
            assert time.monotonic() - started < 20  # nothing waited for the build
            release.set()
            deadline = time.monotonic() + 60
            while (answer := client.get("/api/search", params={"q": "tma"})).status_code == 503:
                assert time.monotonic() < deadline, "the search never became ready"
            assert answer.status_code == 200 and answer.json()["results"][0]["id"] == "hw-tma"
    finally:
        release.set()
        holder.join(10)
        store.engine.dispose()
