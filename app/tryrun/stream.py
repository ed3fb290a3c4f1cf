"""A try run's progress as Server-Sent Events: `queued`, `compiling`, `running` (per target), then `done`.

Read back from the try result's row (app/tryrun/store.py), so a stream follows a run whoever executes it: the
local pool's thread or a GPU worker of the queue. `done` carries the whole try run as `GET /api/try/{id}` answers
it. A stored answer streams only `done` (with `"cached": true`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool

from app.tryrun.service import public_row
from app.tryrun.store import TryResults

POLL_S = 0.2
"""How often the stream looks at the row."""
KEEPALIVE_S = 15.0
"""A comment line this often while nothing happens, so that proxies keep the connection."""
MAX_STREAM_S = 1800.0
"""A stream ends after this long (the run goes on: GET /api/try/{id} shows it)."""


def sse(event: str, data: dict[str, Any], event_id: int | None = None) -> str:
    """One Server-Sent Event (data as one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def progress(results: TryResults, try_id: str, cached: bool) -> AsyncIterator[str]:
    """The events of `try_id` from the first (or, `cached`, only `done`) until `done`."""
    sent = 0
    started = last = time.monotonic()
    while True:
        row = await run_in_threadpool(results.get, try_id)
        if row is None:
            yield sse("error", {"id": try_id, "detail": f"no try run '{try_id}'"})
            return
        events = json.loads(row.events)
        if cached and row.state == "done":
            sent = len(events) - 1
        for number, event in enumerate(events[sent:], start=sent):
            name = str(event.get("event"))
            data: dict[str, Any] = {"id": try_id, **event}
            if name == "done":
                data.update({"cached": cached, "run": public_row(row)})
            yield sse(name, data, number)
            last = time.monotonic()
        sent = len(events)
        if row.state == "done":
            return
        if not results.reusable(row):
            yield sse("error", {"id": try_id, "detail": "the try run was lost (its server stopped); ask again to run it"})
            return
        now = time.monotonic()
        if now - started > MAX_STREAM_S:
            yield sse("error", {"id": try_id, "detail": f"still not done; GET /api/try/{try_id} shows it when it is"})
            return
        if now - last > KEEPALIVE_S:
            yield ": still working\n\n"
            last = now
        await asyncio.sleep(POLL_S)


async def wait_done(results: TryResults, try_id: str, limit_s: float = MAX_STREAM_S) -> dict[str, Any] | None:
    """The try run as JSON once done (None: gone, or not done within `limit_s`)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        row = await run_in_threadpool(results.get, try_id)
        if row is None:
            return None
        if row.state == "done" or not results.reusable(row):
            return public_row(row)
        await asyncio.sleep(POLL_S)
    return None


def wait_done_blocking(results: TryResults, try_id: str, limit_s: float = MAX_STREAM_S) -> dict[str, Any] | None:
    """`wait_done` for a caller in a worker thread (the MCP tools)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        row = results.get(try_id)
        if row is None:
            return None
        if row.state == "done" or not results.reusable(row):
            return public_row(row)
        time.sleep(POLL_S)
    return None
