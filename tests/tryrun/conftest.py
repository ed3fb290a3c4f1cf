"""Fixtures of the try-run tests: the service over real HTTP with try runs on (SQLite, local pool), and tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer

KERNEL = "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"
PROGRAM = (
    "#include <cstdio>\n__global__ void k(int* out) { *out = 42; }\n"
    'int main() { std::printf("hello from the try run\\n"); return 0; }\n'
)


def try_settings(tmp_path: Path, wiki: Path, **more: Any):  # type: ignore[no-untyped-def]
    from app.settings import Settings

    evidence = tmp_path / "evidence"
    evidence.mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "wiki": wiki,
        "db": f"sqlite:///{tmp_path / 'index.db'}",
        "evidence": evidence,
        "runner_token": "test-runner-token",
        "try_enabled": True,
        "try_dir": tmp_path / "try",
        **more,
    }
    return Settings(**values)


class TryClient:
    """An httpx client of the live service, plus the app (its try service) and a way to make tokens."""

    def __init__(self, http: httpx.Client, app: Any) -> None:
        self.http = http
        self.app = app

    @property
    def service(self) -> Any:
        return self.app.state.tryrun

    def token(self, name: str, **quotas: int) -> str:
        from app.tryrun.tokens import create_token

        return create_token(self.service.engine, name, quotas.get("compiles_per_hour"), quotas.get("gpu_seconds_per_day"))

    def post(self, body: dict[str, Any], token: str | None = None, accept: str = "text/event-stream") -> httpx.Response:
        headers = {"Accept": accept}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return self.http.post("/api/try", json=body, headers=headers)


def events_of(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The Server-Sent Events of a whole answer, in order (comments skipped)."""
    out = []
    for block in response.text.split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if name is not None and data is not None:
            out.append((name, data))
    return out


@contextmanager
def serve(settings: Any) -> Iterator[TryClient]:
    from app.main import create_app

    app = create_app(settings)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=300) as http:
        yield TryClient(http, app)


@pytest.fixture
def tried(tmp_path: Path, wiki_dir: Path) -> Iterator[TryClient]:
    """The service with try runs on: SQLite, the local pool (this machine has no GPU: compile-only)."""
    with serve(try_settings(tmp_path, wiki_dir)) as client:
        yield client
