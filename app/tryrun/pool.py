"""The local pool: try runs of a service without a job queue (the embedded default, SQLite), in threads of its own.

Bounded both ways: `try_pool_workers` units are built at once and `try_pool_queue` more may wait; beyond that a
request is refused (429, Retry-After) rather than queued without end. There is no nightly verification in this
process to yield to, so the cap is the protection: the compiler and the GPU are never given to more than the
pool's workers, and programs run one at a time on the GPU (`gpu_lock`). Without a GPU every unit is compile-only,
and its result says so.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

from app.settings import Settings
from app.tryrun.store import TryResults
from app.tryrun.work.execute import execute
from app.tryrun.work.unit import Unit

log = logging.getLogger("kernelwiki.try")

RETRY_WHEN_FULL_S = 10
"""Retry-After of a request refused because the pool is full."""


class PoolFull(Exception):
    """Every worker is busy and the waiting room is full."""

    def __init__(self, waiting: int) -> None:
        super().__init__(
            f"the try pool is full ({waiting} try runs building or waiting, the most this server takes); "
            f"try again in {RETRY_WHEN_FULL_S} s"
        )
        self.retry_after_s = RETRY_WHEN_FULL_S


def local_toolchain(settings: Settings) -> Any:
    """The toolchain the pool builds with: the installed release `Settings.toolchain`, else the nvcc found on PATH."""
    from runner.toolchain import discover_toolchain
    from runner.toolchains import select_toolchain, toolchains_dir

    if settings.toolchain:
        return select_toolchain(settings.toolchain, toolchains_dir().resolve())
    return discover_toolchain()


class LocalPool:
    """Threads that execute try units and store what they find in `results`."""

    kind = "local"

    def __init__(self, settings: Settings, results: TryResults) -> None:
        self.settings = settings
        self.results = results
        self.capacity = max(1, settings.try_pool_workers) + max(0, settings.try_pool_queue)
        self._threads = ThreadPoolExecutor(max_workers=max(1, settings.try_pool_workers), thread_name_prefix="kernelwiki-try")
        self._slots = threading.BoundedSemaphore(self.capacity)
        self._lock = threading.Lock()
        self._tools: tuple[Any, list[Any]] | None = None
        self.gpu_lock = threading.Lock()  # one program on the GPU at a time, whatever the number of workers
        self.in_flight = 0

    def tools(self) -> tuple[Any, list[Any]]:
        """(toolchain, GPUs), discovered once (nvcc --version, the driver): every key and build uses the same."""
        with self._lock:
            if self._tools is None:
                from runner.gpus import discover_gpus_cached

                toolchain = local_toolchain(self.settings)
                self._tools = (toolchain, discover_gpus_cached(self.settings.try_dir / "cache"))
            return self._tools

    def tag(self) -> tuple[str, str]:
        """(toolchain fingerprint, where it runs) for the result key."""
        toolchain, gpus = self.tools()
        where = ",".join(f"{g.name}/{g.compute_capability}/{g.driver_version}" for g in gpus) or "no GPU"
        return toolchain.fingerprint, f"local:{where}"

    def has_gpu(self) -> bool:
        return bool(self.tools()[1])

    def reserve(self) -> None:
        """Take a place in the pool, or PoolFull."""
        if not self._slots.acquire(blocking=False):
            raise PoolFull(self.capacity)
        with self._lock:
            self.in_flight += 1

    def release(self) -> None:
        with self._lock:
            self.in_flight -= 1
        self._slots.release()

    def start(self, unit: Unit, try_id: str, compile_only: str | None) -> None:
        """Run a unit whose place was reserved; its events and result go to the database."""
        self._threads.submit(self._run, unit, try_id, compile_only)

    def _run(self, unit: Unit, try_id: str, compile_only: str | None) -> None:
        try:
            toolchain, gpus = self.tools()
            with self.gpu_lock if unit.runs and compile_only is None else nullcontext():
                result = execute(
                    unit,
                    try_id,
                    compile_only=compile_only,
                    toolchain=toolchain,
                    gpus=gpus,
                    isolation=self.settings.isolation,
                    work_dir=self.settings.try_dir,
                    executor="local",
                    on_event=lambda name, data: self.results.add_event(try_id, name, data),
                )
            self.results.finish(try_id, result)
        except Exception:  # noqa: BLE001 - a lost database: logged; the row is taken as lost after ABANDONED_AFTER_S
            log.exception("try run %s: could not be stored", try_id)
        finally:
            self.release()

    def close(self) -> None:
        """Stop taking units; the ones waiting are dropped (their rows are taken as lost later), the running one ends."""
        self._threads.shutdown(wait=False, cancel_futures=True)
