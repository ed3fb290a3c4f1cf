"""`kernelwiki serve`: check what can be checked before listening, then run uvicorn (one process or several).

Before anything is printed as served: the wiki folder must exist (started
outside the repository, the service would otherwise serve an empty site), an
empty wiki or a missing evidence folder is warned about, the port is bound
(a busy port is one clear error), and the index is opened (a damaged one is
one line with the fix). Then the app listens at once and indexes in the
background. With `workers > 1` this process indexes (and watches) and
publishes its progress to a status file, while worker processes forked from
one that has imported the app (app/serve_workers.py) serve, each opening
SQLite read-only.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.errors import broken_index_line
from app.settings import Settings

if TYPE_CHECKING:
    from app.store import Store

Say = Callable[[str], None]


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
    """Serve until stopped; returns the exit status (1: could not start, or the workers stopped; 2: nothing to serve)."""
    warnings, fatal = folder_problems(settings)
    for line in warnings:
        warn(line)
    if fatal:
        warn(fatal)
        return 2
    try:
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        warn(port_error(settings.host, settings.port, exc))
        return 1
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
        return _serve_alone(settings, sock, common, say, warn)
    return _serve_with_workers(settings, sock, workers, common, say, warn)


def _open_index(settings: Settings, warn: Say) -> Store | None:
    """The index, migrated once, here, before any worker opens it read-only; None: damaged (said with the fix)."""
    from app.main import open_store

    try:
        return open_store(settings)
    except Exception as exc:
        broken = broken_index_line(settings.db, exc)
        if broken is None:
            raise
        warn(broken)
        return None


def _serve_alone(settings: Settings, sock: socket.socket, common: dict[str, Any], say: Say, warn: Say) -> int:
    """One process: it indexes in the background and serves."""
    import uvicorn

    from app.main import create_app

    with sock:
        store = _open_index(settings, warn)
        if store is None:
            return 1
        store.engine.dispose()  # the app's lifespan opens its own
        url = f"http://{settings.host}:{settings.port}"
        say(
            f"serving {url} (indexing {settings.wiki} in the background{'; watching for changes' if settings.watch else ''}; "
            f"{url}/api/health shows progress)"
        )
        uvicorn.Server(uvicorn.Config(create_app(settings), **common)).run(sockets=[sock])
    return 0


def _serve_with_workers(
    settings: Settings, sock: socket.socket, workers: int, common: dict[str, Any], say: Say, warn: Say
) -> int:
    """This process indexes (and watches); `workers` processes forked by a zygote serve (app/serve_workers.py)."""
    import uvicorn

    from app.main import create_app, import_what_serving_uses, keeper_for
    from app.serve_workers import Serve, fork_zygote
    from app.watch import IndexStatus, status_file

    # The workers' app: every setting of this process, read-only and not watching (this process indexes).
    worker_settings = settings.model_copy(update={"read_only": True, "watch": False})

    def build() -> Serve:
        """In the zygote, before the workers are forked: what they share, and what each one runs."""
        config = uvicorn.Config(create_app(worker_settings), **common)
        config.load()
        config.get_loop_factory()  # imports uvicorn's asyncio loop module
        import_what_serving_uses(worker_settings)
        return lambda listener: uvicorn.Server(config).run(sockets=[listener])

    # Forked now, before this process starts a thread (the index keeper); it forks the workers on `start`.
    with sock:  # the zygote holds the listener: with it gone, the port refuses connections rather than queue them
        zygote = fork_zygote(sock, workers, build, settings.shutdown_timeout_s)
    try:
        store = _open_index(settings, warn)
        if store is None:
            return 1
        status = IndexStatus(sink=status_file(settings))
        status.update(state="starting")
        keeper = keeper_for(settings, store, status).start()
        say(
            f"serving http://{settings.host}:{settings.port} with {workers} workers "
            f"(this process indexes {settings.wiki}; the workers read the index read-only)"
        )
        try:
            zygote.start()
            code = zygote.serve_until_stopped()
        finally:
            keeper.stop()
            store.engine.dispose()
    finally:
        zygote.abandon()  # when it has not ended yet: not started (the index could not be opened) or interrupted
    if code:
        warn(f"error: the workers stopped (status {code}; the log above says why)")
        return 1
    return 0
