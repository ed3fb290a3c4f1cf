"""Evidence records shaped like runner/evidence.py writes them, for tests and the benchmark."""

from __future__ import annotations

import hashlib
from typing import Any

GPU = {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.65"}
PTXAS = (
    "ptxas info    : Compiling entry function '_Z6kernelPi' for 'sm_90a'\n"
    "ptxas info    : Used 18 registers, used 1 barriers, 4096 bytes smem, 368 bytes cmem[0]\n"
)


def record(
    snippet: dict[str, Any],
    target: str,
    step: str,
    status: str,
    *,
    stale: bool = False,
    timestamp: str = "2026-01-15T10:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    """One record for a snippet (as `/api/snippets` returns it) × target × step."""
    content_hash = ("0" * 64) if stale else snippet["content_hash"]
    data: dict[str, Any] = {
        "page_id": snippet["page_id"],
        "snippet_id": snippet["id"],
        "path": "",
        "line": snippet["line"],
        "lang": snippet["lang"],
        "target": target,
        "step": step,
        "status": status,
        "message": "",
        "exit_code": 0 if status == "pass" else 1,
        "duration_s": 1.25,
        "output": "",
        "resources": {},
        "checks": [],
        "content_hash": content_hash,
        "toolchain": "nvcc 13.0.88",
        "host": "gpu-node-1",
        "isolation": "bwrap",
        "timestamp": timestamp,
        "mode": snippet["mode"],
        **(GPU if step == "run" and status != "skipped" else {}),
    }
    data.update(extra)
    key = "|".join((snippet["id"], target, step, content_hash, timestamp, status))
    data["record_id"] = hashlib.sha256(key.encode()).hexdigest()[:32]
    return data


def typical(snippets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A realistic run: everything compiles on sm_90a and runs on an H200; sm_100a can't run here."""
    out: list[dict[str, Any]] = []
    for s in snippets:
        if s["mode"] in ("sketch", "error"):
            continue
        for target in s["targets"]:
            if s["mode"] == "compile_fail":
                out.append(record(s, target, "compile", "xfail", output="error: expected failure"))
                continue
            out.append(record(s, target, "compile", "pass", output=PTXAS, resources={"registers": 18, "smem_bytes": 4096}))
            if s["mode"] == "run":
                if target.startswith(("sm_90", "sm_80", "sm_89")) or target == "any":
                    out.append(record(s, target, "run", "pass", output="OK\n"))
                else:
                    out.append(record(s, target, "run", "skipped", message=f"no SM{target[3:].rstrip('af')} GPU"))
    return out
