"""deploy/fleet_check.py: a pair counts only with fresh records for every step its mode needs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fleet_check", ROOT / "deploy" / "fleet_check.py")
assert _spec and _spec.loader
fleet_check = importlib.util.module_from_spec(_spec)
sys.modules["fleet_check"] = fleet_check
_spec.loader.exec_module(fleet_check)

SINCE = "2026-12-02T16:00:00Z"


def _record(snippet: str, target: str, step: str, status: str, when: str, stale: bool = False) -> dict[str, Any]:
    data = {"host": "gpu-node-1", "isolation": "bwrap", "gpu_name": "NVIDIA H200" if step == "run" else None}
    return {
        "record_id": f"{snippet}{target}{step}{when}",
        "snippet_id": snippet,
        "target": target,
        "step": step,
        "status": status,
        "stale": stale,
        "timestamp": when,
        "data": data,
    }


SNIPPETS = [
    {"id": "hw-tma:1", "mode": "run", "targets": ["sm_90a", "sm_100a"]},
    {"id": "hw-tma:2", "mode": "compile", "targets": ["sm_90a"]},
    {"id": "hw-tma:3", "mode": "sketch", "targets": ["sm_90a"]},
]
HISTORY = {
    "hw-tma:1": [
        _record("hw-tma:1", "sm_90a", "compile", "pass", "2026-12-02T16:00:05Z"),
        _record("hw-tma:1", "sm_90a", "run", "pass", "2026-12-02T15:00:00Z"),  # before the fan-out: does not count
        _record("hw-tma:1", "sm_100a", "compile", "pass", "2026-12-02T16:00:06Z"),
    ],
    "hw-tma:2": [_record("hw-tma:2", "sm_90a", "compile", "pass", "2026-12-02T16:00:09Z")],
    "hw-tma:3": [],
}


def _handler(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/snippets":
        target = request.url.params["target"]
        offset = int(request.url.params.get("offset", 0))
        chosen = [s for s in SNIPPETS if target in s["targets"]]
        window = chosen[offset : offset + 1]  # one per page: the walk must follow `next`
        nxt = f"target={target}&limit=1&offset={offset + 1}" if offset + 1 < len(chosen) else None
        return httpx.Response(200, json={"total": len(chosen), "snippets": window, "next": nxt})
    snippet_id = request.url.path.split("/")[3]
    history = sorted(HISTORY[snippet_id], key=lambda r: r["timestamp"], reverse=True)  # newest first, as the API
    start = int(request.url.params.get("next", 0))
    asked.append((snippet_id, start))
    nxt = f"limit=1&next={start + 1}" if start + 1 < len(history) else None  # one per window: the walk must follow `next`
    return httpx.Response(200, json={"total": len(history), "limit": 1, "next": nxt, "records": history[start : start + 1]})


asked: list[tuple[str, int]] = []


def _check(targets: list[str]) -> dict[tuple[str, str], Any]:
    client = httpx.Client(base_url="http://fleet", transport=httpx.MockTransport(_handler))
    return {(p.snippet_id, p.target): p for p in fleet_check.check(client, targets, fleet_check._when(SINCE))}


def test_run_program_without_a_fresh_run_is_missing_and_compile_only_snippet_is_done() -> None:
    pairs = _check(["sm_90a"])
    assert set(pairs) == {("hw-tma:1", "sm_90a"), ("hw-tma:2", "sm_90a")}  # the sketch needs nothing
    assert not pairs["hw-tma:1", "sm_90a"].done
    done = pairs["hw-tma:2", "sm_90a"]
    assert done.done and done.host == "gpu-node-1" and done.isolation == "bwrap" and done.after_s == 9.0


def test_a_fresh_run_record_completes_the_pair_and_names_the_gpu() -> None:
    HISTORY["hw-tma:1"].append(_record("hw-tma:1", "sm_90a", "run", "pass", "2026-12-02T16:00:20Z"))
    try:
        pair = _check(["sm_90a"])["hw-tma:1", "sm_90a"]
    finally:
        HISTORY["hw-tma:1"].pop()
    assert pair.done and pair.steps == {"compile": "pass", "run": "pass"} and pair.gpu == "NVIDIA H200"


def test_stale_records_never_count() -> None:
    HISTORY["hw-tma:2"][0]["stale"] = True
    try:
        assert not _check(["sm_90a"])["hw-tma:2", "sm_90a"].done
    finally:
        HISTORY["hw-tma:2"][0]["stale"] = False


def test_only_the_asked_targets_are_checked() -> None:
    assert set(_check(["sm_100a"])) == {("hw-tma:1", "sm_100a")}


def test_the_walk_over_a_history_stops_at_the_first_record_older_than_the_fan_out() -> None:
    HISTORY["hw-tma:1"].append(_record("hw-tma:1", "sm_90a", "run", "fail", "2026-12-01T10:00:00Z"))  # far back
    asked.clear()
    try:
        _check(["sm_90a"])
    finally:
        HISTORY["hw-tma:1"].pop()
    # newest first: 16:00:06, 16:00:05, then 15:00 (before --since) ends the walk; 2026-12-01 is never asked for
    assert [start for sid, start in asked if sid == "hw-tma:1"] == [0, 1, 2]
