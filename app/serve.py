"""`kernelwiki serve`: check what can be checked before listening, then run uvicorn (one process or several).

Before anything is printed as served: the wiki folder must exist (started
outside the repository, the service would otherwise serve an empty site), an
empty wiki or a missing evidence folder is warned about, the port is bound
(a busy port is one clear error), and the index is opened (a damaged one is
one line with the fix). Then the app listens at once and indexes in the
background. With `workers > 1` this process indexes (and watches) and
publishes its progress to a status file, while uvicorn's worker processes
serve, each opening SQLite read-only.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.errors import broken_index_line
from app.settings import Settings

Say = Callable[[str], None]
WORKER_HEALTHCHECK_S = 30
"""How long uvicorn's supervisor waits for a worker to answer its ping before killing it as hung. uvicorn's 5 s
is shorter than a fresh worker's start-up on a busy 2-core host (imports before it can answer): workers were
killed and restarted in a loop, and the port never answered."""


def folder_problems(settings: Settings) -> tuple[list[str], str | None]:
    """Warnings about the wiki and evidence folders, and the error that stops `serve` (a missing wiki folder)."""
    wiki, evidence = settings.wiki, settings.evidence
    if not wiki.is_dir():
        where = wiki.resolve()
        return [], (
            f"{where}: error: no wiki folder here; run `kernelwiki serve` in the repository, or pass --wiki DIR (KERNELWIKI_WIKI)"
        )
    warnings: list[str] = []
    if not any(p.suffix == ".md" for p in wiki.rglob("*.md")):
        warnings.append(
            f"{wiki.resolve()}: warning: the wiki folder has no Markdown pages; the site will be empty until pages are added"
        )
    if not evidence.is_dir():
        warnings.append(
            f"{evidence.resolve()}: warning: no evidence folder; snippets will show no verification "
            f"(pass --evidence DIR or KERNELWIKI_EVIDENCE)"
        )
    elif not any(evidence.glob("*.jsonl")):
        warnings.append(f"{evidence.resolve()}: warning: the evidence folder has no *.jsonl records")
    return warnings, None


def bind(host: str, port: int, listen: bool = True) -> socket.socket:
    """A socket bound to host:port, listening unless told not to (raises OSError when the port is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on connections whose socket says TCP; with
    # proto 0 every answer waited ~40 ms for the client's delayed ACK (headers and body are two writes).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections (Linux)
    try:
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def port_error(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"error: port {port} on {host} is already in use (another kernelwiki serve?); "
            f"stop it, or pick another port: --port N, KERNELWIKI_PORT=N, or make serve PORT=N"
        )
    return f"error: cannot listen on {host}:{port}: {exc.strerror or exc}"


def run_server(settings: Settings, workers: int, say: Say, warn: Say) -> int:
    """Serve until stopped; returns the exit status (1: could not start, 2: nothing to serve)."""
    import uvicorn

    from app.lifeline import PARENT_ENV
    from app.main import create_app, keeper_for, open_store
    from app.watch import IndexStatus, status_file

    warnings, fatal = folder_problems(settings)
    for line in warnings:
        warn(line)
    if fatal:
        warn(fatal)
        return 2
    try:
        # Several workers: only probe (bound, not listening, so no connection is accepted and then dropped);
        # uvicorn's supervisor binds the port itself and shares it with its workers.
        sock = bind(settings.host, settings.port, listen=workers == 1)
        if workers > 1:
            sock.close()
    except OSError as exc:
        warn(port_error(settings.host, settings.port, exc))
        return 1
    try:
        store = open_store(settings)  # migrates once, here, before any worker opens it read-only
    except Exception as exc:
        sock.close()  # (closing twice is harmless)
        broken = broken_index_line(settings.db, exc)
        if broken is None:
            raise
        warn(broken)
        return 1
    url = f"http://{settings.host}:{settings.port}"
    # asyncio's own loop even where uvloop is installed: under a saturating load uvloop served some connections
    # seconds late (64 connections of uncached search: p99 1.1-3.7 s against 0.12 s). HTTP parsing: httptools.
    common: dict[str, Any] = {  # uvicorn.Config's keyword arguments, shared by both ways of serving
        "log_level": "info",
        "access_log": settings.access_log,
        "timeout_graceful_shutdown": settings.shutdown_timeout_s,
        "timeout_keep_alive": 5,
        "loop": "asyncio",
    }
    if workers == 1:
        store.engine.dispose()  # the app's lifespan opens its own
        say(
            f"serving {url} (indexing {settings.wiki} in the background{'; watching for changes' if settings.watch else ''}; "
            f"{url}/api/health shows progress)"
        )
        server = uvicorn.Server(uvicorn.Config(create_app(settings), **common))
        server.run(sockets=[sock])
        return 0
    status = IndexStatus(sink=status_file(settings))
    status.update(state="starting")
    keeper = keeper_for(settings, store, status).start()
    os.environ.update(
        {
            "KERNELWIKI_WIKI": str(Path(settings.wiki).resolve()),
            "KERNELWIKI_DB": settings.db,
            "KERNELWIKI_EVIDENCE": str(Path(settings.evidence).resolve()),
            "KERNELWIKI_WATCH": "false",
            "KERNELWIKI_TRY": "1" if settings.try_enabled else "0",  # `serve --try` reaches every worker (docs/try.md)
            PARENT_ENV: str(os.getpid()),  # each worker ends with this process, even after a kill -9 (app/lifeline.py)
        }
    )
    say(f"serving {url} with {workers} workers (this process indexes {settings.wiki}; the workers read the index read-only)")
    try:
        uvicorn.run(
            "app.main:worker_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=workers,
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
            **common,
        )
    finally:
        keeper.stop()
        store.engine.dispose()
    return 0
