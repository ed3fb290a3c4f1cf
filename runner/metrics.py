"""Measurements a program reports on a descriptor of its own, and their validation before they enter a record.

A page's program that uses the measuring harness (snippets/harness/) writes one JSON document on
the file descriptor named by `KERNELWIKI_METRICS_FD`. The runner gives every run such a descriptor
(the write end of a pipe, passed through the sandbox like the launcher's status descriptor), reads
it while the program runs, and keeps the result as the run record's `metrics`. Nothing is ever
parsed from the program's standard output, and nothing is read back from a path the program could
write.

What is kept is checked here, in one place: at most `MAX_METRICS_BYTES`, one JSON object, at most
`MAX_METRICS` metrics with names of `[a-z0-9_.-]`, finite numbers, short strings; and a roofline
floor: on an NVIDIA H200 a rate above the datasheet peak of its declared bound is rejected.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import threading
from typing import Any

METRICS_FD_ENV = "KERNELWIKI_METRICS_FD"
"""Environment variable that names the descriptor (the harness reads it)."""
MAX_METRICS_BYTES = 64 * 1024
"""Largest document kept; a longer one is rejected (and the rest of the pipe drained)."""
MAX_METRICS = 32
MAX_STRING = 200
_KEY = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")

H200_PEAKS = {"hbm": 4.8e12, "tensor_bf16": 989.5e12, "tensor_fp8": 1979e12}
"""NVIDIA H200 SXM datasheet: HBM3e 4.8 TB/s; BF16 1,979 and FP8 3,958 TFLOPS with sparsity, so half dense.
The harness (kw_measure.cuh / kw_measure.py) applies the same floor before it reports."""
PEAK_SLACK = 1.02
"""A rate may exceed a peak by this factor (clock and rounding) before it is called impossible."""


class MetricsPipe:
    """A pipe whose write end the program inherits; a thread reads the other end while it runs.

    Use: `with MetricsPipe() as mp: run_process(…, extra_env=mp.env(), extra_fds=(mp.child_fd,))`,
    then `mp.document()`. `child_fd` is a duplicate that the process runner closes once the program
    has it; the pipe's own write end is closed on leaving the block, so the reader ends even when the
    runner returned early.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        self.child_fd = os.dup(self._w)
        os.set_inheritable(self.child_fd, True)
        self._buf = bytearray()
        self.overflow = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def env(self) -> dict[str, str]:
        return {METRICS_FD_ENV: str(self.child_fd)}

    def __enter__(self) -> MetricsPipe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._w)
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self._r)

    def _take(self, chunk: bytes) -> None:
        room = MAX_METRICS_BYTES + 1 - len(self._buf)
        if room > 0:
            self._buf += chunk[:room]
        if len(self._buf) > MAX_METRICS_BYTES:
            self.overflow = True

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._r], [], [], 0.05)
            if ready:
                chunk = os.read(self._r, 65536)
                if not chunk:
                    return
                self._take(chunk)
            elif self._stop.is_set():
                return  # every writer is gone or leaked; what was written has been read

    def document(self) -> tuple[dict[str, Any] | None, str | None]:
        """(validated document, None), (None, why it was rejected), or (None, None) when nothing was written."""
        if not self._buf:
            return None, None
        if self.overflow:
            return None, f"metrics: more than {MAX_METRICS_BYTES} bytes on the metrics descriptor"
        return validate_metrics(bytes(self._buf))


def _scalar(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_STRING


def validate_metrics(raw: bytes, gpu_name: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """Check a metrics document; (document, None) or (None, 'metrics: why')."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"metrics: not JSON: {exc}"[:300]
    if not isinstance(doc, dict):
        return None, "metrics: not a JSON object"
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        return None, "metrics: no 'metrics' object"
    if len(metrics) > MAX_METRICS:
        return None, f"metrics: more than {MAX_METRICS} metrics"
    for part in ("gpu", "clocks"):
        section = doc.get(part, {})
        if not isinstance(section, dict) or len(section) > 20:
            return None, f"metrics: '{part}' is not a small object"
        for key, value in section.items():
            if not _KEY.match(str(key)) or not _scalar(value):
                return None, f"metrics: {part}.{key} is not a plain value"
    name = gpu_name or str(doc.get("gpu", {}).get("name") or "")
    for key, m in metrics.items():
        if not _KEY.match(key):
            return None, f"metrics: bad metric name {key[:70]!r}"
        if not isinstance(m, dict) or len(m) > 12:
            return None, f"metrics: {key} is not a small object"
        for field, value in m.items():
            if not _KEY.match(str(field)) or not _scalar(value):
                return None, f"metrics: {key}.{field} is not a plain value"
        value = m.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None, f"metrics: {key} has no numeric 'value'"
        peak = H200_PEAKS.get(str(m.get("bound")))
        if peak and "H200" in name and value > peak * PEAK_SLACK:
            return None, f"metrics: {key} = {value:g} is faster than the H200's {m.get('bound')} peak {peak:g}: impossible"
    kept = {k: doc[k] for k in ("harness", "name", "gpu", "clocks", "metrics", "guard_failures") if k in doc}
    if not _scalar(kept.get("harness")) or not _scalar(kept.get("name")) or not _scalar(kept.get("guard_failures")):
        return None, "metrics: 'harness', 'name' and 'guard_failures' must be plain values"
    return kept, None
