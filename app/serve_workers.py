"""The workers of `kernelwiki serve --workers N`: forked, copy-on-write, from a process that has imported the app.

uvicorn's own supervisor spawned each worker as a fresh interpreter that imported Python, FastAPI and the app by
itself: ~100 MB private per worker before it had served anything (docs/benchmarks.md). Here `serve` forks one small
supervisor, the zygote, before it starts any thread (a fork copies only the forking thread: a lock another thread
held at that moment stays held for ever in the child). The zygote builds the app and uvicorn's configuration (no
I/O, nothing opened), freezes what it made out of the garbage collector's way (`gc.freeze`: a collection writes to
every object it scans, which would copy each shared page into every worker), waits until `serve` has migrated the
index, then forks the workers. Each serves the one listening socket `serve` bound; each runs the app's lifespan
(opening the index read-only) after the fork, so no connection or memory-mapped index is shared.

The zygote stays single-threaded: one `select` loop over pidfds (`serve`'s and each worker's), the workers' ping
sockets and a signal wake-up socket. It replaces a worker that dies (after a back-off that grows while
replacements keep dying young), kills one that stops answering its ping, stops them all gracefully on SIGINT or
SIGTERM, and ends with `serve`, even a `serve` killed with SIGKILL; each worker ends with the zygote
(app/lifeline.py).
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from app.lifeline import exit_with

Serve = Callable[[socket.socket], None]
"""Serves the listening socket until the process is told to stop (in a worker, after the fork)."""

STARTUP_FAILURE = 3
"""A worker's exit status when the app failed to start (uvicorn's `STARTUP_FAILURE`): every replacement would fail
the same way, so the zygote stops instead of forking them in a loop (as uvicorn's supervisor does)."""
WORKER_HEALTHCHECK_S = 30.0
"""A worker that has not answered the zygote's ping for this long is killed as hung, and replaced (uvicorn's
`timeout_worker_healthcheck`, which was 30 s here too). A thread of the worker answers, as in uvicorn: a request
that keeps the event loop busy is not a hang; a process stopped or stuck with the GIL held is."""
PING_EVERY_S = 5.0
"""How often the zygote pings each worker (well under WORKER_HEALTHCHECK_S)."""
RESTART_FIRST_S = 0.5
"""How long the zygote waits before it replaces a worker that died (never at once: no tight loop of forks)."""
RESTART_MAX_S = 30.0
"""The longest wait before a replacement: the wait doubles each time a worker dies before WORKER_SETTLED_S."""
WORKER_SETTLED_S = 60.0
"""A worker that lived this long died of something of its own: its replacement waits RESTART_FIRST_S again."""
STOP_MARGIN_S = 1.5
"""On SIGINT or SIGTERM the workers get the graceful shutdown timeout plus this long to exit before SIGKILL."""

log = logging.getLogger("uvicorn.error")  # uvicorn's error log, configured by uvicorn.Config in the zygote


def _flush() -> None:
    """Write out what Python buffers for stdout and stderr: before a fork (or each process would write it) and before
    `os._exit` (which does not)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _threads() -> int:
    """This process's threads, native ones included (Python's `threading` counts only its own)."""
    return len(os.listdir("/proc/self/task"))


def _exit_code(status: int) -> int:
    """A `waitpid` status as an exit code (negative: killed by that signal)."""
    return os.waitstatus_to_exitcode(status)


@dataclass
class _Worker:
    slot: int
    pid: int
    pidfd: int
    ping: socket.socket  # the zygote's end of the socket pair a thread of the worker answers on
    born: float
    answered: float


class Zygote:
    """`serve`'s handle on the zygote: let it fork the workers, stop it, wait for it."""

    def __init__(self, pid: int, go: int) -> None:
        self.pid = pid
        self._go: int | None = go
        self.code: int | None = None  # its exit code, once waited for

    def start(self) -> None:
        """Let the zygote fork the workers (the index is migrated)."""
        if self._go is not None:
            try:
                os.write(self._go, b"go")
            except BrokenPipeError:
                pass  # the zygote has ended already (its error is logged): `wait` says how
            finally:
                os.close(self._go)
                self._go = None

    def abandon(self) -> int:
        """Serving is off (the index could not be opened, or `serve` was interrupted): the zygote exits (quietly when
        it had not forked the workers yet); its exit code. Nothing to do once it was waited for."""
        if self.code is not None:
            return self.code
        if self._go is not None:
            os.close(self._go)  # end of file before "go"
            self._go = None
        else:
            self.stop()
        return self.wait()

    def stop(self) -> None:
        if self.code is not None:
            return  # reaped: its pid may be another process's by now
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        """The zygote's exit code, once it has exited (0: stopped by a signal)."""
        if self.code is None:
            self.code = _exit_code(os.waitpid(self.pid, 0)[1])
        return self.code

    def serve_until_stopped(self) -> int:
        """Wait for the zygote, passing SIGINT and SIGTERM on to it as SIGTERM; its exit code."""
        forward = {sig: signal.signal(sig, lambda *_: self.stop()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self.wait()  # waitpid is retried after each signal handler (PEP 475)
        finally:
            for sig, handler in forward.items():
                signal.signal(sig, handler)


def fork_zygote(listener: socket.socket, workers: int, build: Callable[[], Serve], stop_s: float) -> Zygote:
    """Fork the zygote, which will fork `workers` workers serving `listener` once `Zygote.start` is called.

    `build` runs in the zygote, before any worker is forked: it makes what the workers share (the app, uvicorn's
    configuration) and returns what each worker runs. `stop_s`: the workers' graceful shutdown timeout. Raises
    RuntimeError where this process runs threads already (forking it is unsafe: call this before any starts)."""
    if threading.active_count() > 1 or _threads() > 1:
        raise RuntimeError(
            f"serve --workers: {_threads()} threads run before the workers' supervisor is forked; forking now is unsafe "
            "(a module started a thread at import?). Serve with --workers 1 meanwhile."
        )
    serve_pid = os.getpid()
    go_read, go_write = os.pipe()
    _flush()
    pid = os.fork()
    if pid == 0:  # the zygote: never returns
        code = 1
        try:
            os.close(go_write)
            code = _Supervisor(listener, workers, build, serve_pid, go_read, stop_s).run()
        except BaseException:  # noqa: BLE001 - whatever happened, end this process here and say why
            traceback.print_exc()
        finally:
            _flush()
            os._exit(code)
    os.close(go_read)
    return Zygote(pid, go_write)


class _Supervisor:
    """The zygote's loop (see the module's docstring)."""

    def __init__(self, listener: socket.socket, count: int, build: Callable[[], Serve], serve_pid: int, go: int, stop_s: float):
        self.listener, self.count, self.build, self.serve_pid, self.go, self.stop_s = (
            listener,
            count,
            build,
            serve_pid,
            go,
            stop_s,
        )
        self.workers: list[_Worker] = []
        self.restarts: dict[int, float] = {}  # slot -> when its replacement is due
        self.backoff: dict[int, float] = {}  # slot -> the wait before its next replacement
        self.signals = 0  # SIGINT and SIGTERM received
        self.interrupts = 0  # of which SIGINT
        self.wake_read, self.wake_write = socket.socketpair()

    def _on_signal(self, sig: int, frame: object) -> None:
        self.signals += 1
        self.interrupts += sig == signal.SIGINT

    def run(self) -> int:
        for end in (self.wake_read, self.wake_write):
            end.setblocking(False)
        signal.set_wakeup_fd(self.wake_write.fileno())  # a signal wakes the select below
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        try:
            self.serve_fd = os.pidfd_open(self.serve_pid)
        except ProcessLookupError:
            return 1
        self.serve_one = self.build()
        waited = self._wait_for_go()
        if waited is not None:
            return waited
        log.info("Started worker supervisor [%d]: forks %d workers", os.getpid(), self.count)
        for slot in range(self.count):
            self._fork_or_retry(slot)
        next_ping = time.monotonic() + PING_EVERY_S
        while not self.signals:
            now = time.monotonic()
            timeout = max(0.0, min([next_ping, *self.restarts.values()]) - now)
            pings = {w.ping.fileno(): w for w in self.workers}
            ends = {w.pidfd: w for w in self.workers}
            readable, _, _ = select.select([self.wake_read.fileno(), self.serve_fd, *pings, *ends], [], [], timeout)
            now = time.monotonic()
            if self.serve_fd in readable:
                log.error("serve [%d] is gone: stopping its workers", self.serve_pid)
                self._kill_all()
                return 1
            for fd in readable:
                if fd in pings:
                    self._read_answer(pings[fd], now)
            for fd in readable:
                if fd in ends and not self._ended(ends[fd], now):
                    self._stop_all()
                    return 1
            if self.wake_read.fileno() in readable:
                self._drain_wake()
            if now >= next_ping:
                self._ping(now)
                next_ping = now + PING_EVERY_S
            for slot, due in list(self.restarts.items()):
                if now >= due and not self.signals:
                    del self.restarts[slot]
                    self._fork_or_retry(slot)
        return self._stop_all()

    def _wait_for_go(self) -> int | None:
        """Block until `serve` says go (None), or the exit code: 0 when `serve` closed the pipe first (not serving
        after all), 1 when it ended or this process was signalled first (`serve` must not go on with no workers)."""
        try:
            while not self.signals:
                readable, _, _ = select.select([self.go, self.serve_fd, self.wake_read.fileno()], [], [])
                if self.go in readable:
                    return None if os.read(self.go, 16) == b"go" else 0
                if self.serve_fd in readable:
                    return 1
                self._drain_wake()
            return 1
        finally:
            os.close(self.go)

    def _drain_wake(self) -> None:
        try:
            while self.wake_read.recv(64):
                pass
        except BlockingIOError:
            pass

    def _fork_or_retry(self, slot: int) -> None:
        """Fork the worker of `slot`; where the system refuses (no memory, too many processes), try again later."""
        try:
            self._fork(slot)
        except OSError as exc:
            wait = self.backoff.get(slot, RESTART_FIRST_S)
            self.backoff[slot] = min(RESTART_MAX_S, wait * 2)
            self.restarts[slot] = time.monotonic() + wait
            log.error("could not fork a worker (%s): trying again in %.1f s", exc, wait)

    def _fork(self, slot: int) -> None:
        ours, theirs = socket.socketpair()
        gc.collect()
        gc.freeze()  # everything made so far stays out of the collector's way in the workers: their pages stay shared
        _flush()
        zygote = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            raise
        if pid == 0:  # a worker: never returns
            code = 1
            try:
                ours.close()
                self._become_worker(zygote, theirs)
                self.serve_one(self.listener)
                code = 0
            except SystemExit as exc:  # uvicorn exits with STARTUP_FAILURE when the app cannot start
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except BaseException:  # noqa: BLE001 - whatever happened, end this process here and say why
                traceback.print_exc()
            finally:
                _flush()
                os._exit(code)
        theirs.close()
        ours.setblocking(False)
        now = time.monotonic()
        self.workers.append(_Worker(slot, pid, os.pidfd_open(pid), ours, now, now))

    def _become_worker(self, zygote: int, answer: socket.socket) -> None:
        """In a freshly forked worker: drop the zygote's signal handling and descriptors, end with the zygote, answer
        its pings."""
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)  # until uvicorn installs its own: a stop before then ends the worker
        for sibling in self.workers:
            os.close(sibling.pidfd)
            sibling.ping.close()
        self.workers = []
        self.wake_read.close()
        self.wake_write.close()
        os.close(self.serve_fd)
        exit_with(zygote)
        if os.getppid() != zygote:  # the zygote ended between the fork and the watch (exit_with watched another)
            os._exit(1)
        threading.Thread(target=_answer_pings, args=(answer,), name="kernelwiki-ping", daemon=True).start()

    def _read_answer(self, worker: _Worker, now: float) -> None:
        try:
            if worker.ping.recv(64):
                worker.answered = now
        except OSError:
            pass  # the worker is ending: its pidfd says so

    def _ping(self, now: float) -> None:
        for worker in self.workers:
            if now - worker.answered > WORKER_HEALTHCHECK_S:
                log.error("worker [%d] has not answered for %.0f s: killing it", worker.pid, now - worker.answered)
                self._signal(worker, signal.SIGKILL)
                continue
            try:
                worker.ping.send(b"?")
            except OSError:
                pass  # ending (its pidfd says so) or not reading (the answer check above catches it)

    def _ended(self, worker: _Worker, now: float) -> bool:
        """Reap a worker that ended and plan its replacement; False: it could not start, stop serving."""
        code = self._reap(worker)
        if code == STARTUP_FAILURE:
            log.error("worker [%d] failed to start: stopping (the app's error is above)", worker.pid)
            return False
        lived = now - worker.born
        wait = RESTART_FIRST_S if lived >= WORKER_SETTLED_S else self.backoff.get(worker.slot, RESTART_FIRST_S)
        self.backoff[worker.slot] = min(RESTART_MAX_S, wait * 2)
        self.restarts[worker.slot] = now + wait
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        log.warning("worker [%d] ended (%s) after %.1f s: a new one in %.1f s", worker.pid, how, lived, wait)
        return True

    def _reap(self, worker: _Worker) -> int:
        code = _exit_code(os.waitpid(worker.pid, 0)[1])
        os.close(worker.pidfd)
        worker.ping.close()
        self.workers.remove(worker)
        return code

    def _signal(self, worker: _Worker, sig: int) -> None:
        try:
            os.kill(worker.pid, sig)
        except ProcessLookupError:
            pass

    def _kill_all(self) -> None:
        for worker in list(self.workers):
            self._signal(worker, signal.SIGKILL)
            self._reap(worker)

    def _stop_all(self) -> int:
        """SIGTERM every worker, give them `stop_s` + STOP_MARGIN_S (a second Ctrl-C cuts that short), SIGKILL the
        rest; 0.

        Only a second SIGINT cuts it short: one Ctrl-C reaches the whole process group (the zygote, its workers and
        `serve`, which passes it on as SIGTERM), so the zygote sees two signals for one Ctrl-C."""
        for worker in self.workers:
            self._signal(worker, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_s + STOP_MARGIN_S
        while self.workers and self.interrupts < 2:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ends = {w.pidfd: w for w in self.workers}
            readable, _, _ = select.select([self.wake_read.fileno(), *ends], [], [], left)
            for fd in readable:
                if fd in ends:
                    self._reap(ends[fd])
            if self.wake_read.fileno() in readable:
                self._drain_wake()
        self._kill_all()
        return 0


def _answer_pings(answer: socket.socket) -> None:
    """A worker's thread: answer each ping of the zygote (until the zygote closes its end)."""
    try:
        while answer.recv(64):
            answer.send(b"!")
    except OSError:
        pass
