"""Is the fleet verifying? Wait until the service holds fresh evidence for every snippet × target.

    python3 deploy/fleet_check.py --server http://127.0.0.1:8000 --target sm_90 --target sm_90a \
        --since 2026-12-02T16:00:00Z [--timeout 900] [--json report.json]

Reads only the service's public API (`GET /api/snippets`, `GET
/api/snippets/{id}/evidence`). A snippet × target counts as verified when it
has a record newer than `--since` for the snippet's current content, for
every step its mode needs (compile; and run for a runnable program), and
prints who verified it: host, GPU, isolation, and the seconds from `--since`
to its last record. Sketches need nothing. Exit 0 when every pair is
verified, 1 when the timeout passes first (the missing pairs are listed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

NEEDS = {"run": ("compile", "run"), "compile": ("compile",), "compile_fail": ("compile",)}
"""Steps each mode needs before a target counts as verified (sketches need none)."""


@dataclass
class PairReport:
    """What the service holds for one snippet on one target."""

    snippet_id: str  # PAGE_ID:N
    target: str  # e.g. sm_90a
    mode: str  # run | compile | compile_fail
    steps: dict[str, str] = field(default_factory=dict)  # step → status of its newest fresh record
    host: str = ""  # machine that produced the newest fresh record
    gpu: str = ""  # GPU of the run step, when there is one
    isolation: str = ""  # sandbox in force for that record
    after_s: float | None = None  # seconds from --since to the newest fresh record

    @property
    def done(self) -> bool:
        return all(step in self.steps for step in NEEDS.get(self.mode, ()))


def _when(stamp: str) -> datetime:
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def snippets(client: httpx.Client, targets: list[str]) -> list[dict[str, Any]]:
    """Every snippet that declares one of `targets`, walking the API's pages."""
    found: dict[str, dict[str, Any]] = {}
    for target in targets:
        query: str | None = f"target={target}&limit=200"
        while query:
            body = client.get(f"/api/snippets?{query}").raise_for_status().json()
            for s in body["snippets"]:
                found[s["id"]] = s
            query = body.get("next")
    return [found[k] for k in sorted(found)]


def recent_records(client: httpx.Client, snippet_id: str, since: datetime) -> list[dict[str, Any]]:
    """A snippet's records from `since` on: the API answers newest first, a window at a time, so the walk
    stops at the first window that reaches back before `since`."""
    found: list[dict[str, Any]] = []
    query: str | None = ""
    while query is not None:
        body = client.get(f"/api/snippets/{snippet_id}/evidence?{query}").raise_for_status().json()
        found += body["records"]
        if any(_when(r["timestamp"]) < since for r in body["records"]):
            break
        query = body.get("next")
    return found


def check(client: httpx.Client, targets: list[str], since: datetime) -> list[PairReport]:
    reports = []
    for s in snippets(client, targets):
        if s["mode"] not in NEEDS:
            continue
        history = recent_records(client, s["id"], since)
        for target in sorted(set(s["targets"]) & set(targets)):
            pair = PairReport(s["id"], target, s["mode"])
            fresh = [r for r in history if r["target"] == target and not r["stale"] and _when(r["timestamp"]) >= since]
            for r in sorted(fresh, key=lambda r: _when(r["timestamp"])):
                data = r.get("data") or {}
                pair.steps[r["step"]] = r["status"]
                pair.host = data.get("host", pair.host)
                pair.isolation = data.get("isolation", pair.isolation)
                pair.gpu = data.get("gpu_name") or pair.gpu
                pair.after_s = round((_when(r["timestamp"]) - since).total_seconds(), 1)
            reports.append(pair)
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="http://127.0.0.1:8000")
    parser.add_argument("--target", action="append", required=True)
    parser.add_argument("--since", required=True, help="RFC 3339 time of the fan-out")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", help="also write the pairs to this file")
    args = parser.parse_args(argv)
    since = _when(args.since)
    deadline = time.monotonic() + args.timeout
    with httpx.Client(base_url=args.server, timeout=30.0) as client:
        while True:
            reports = check(client, args.target, since)
            missing = [p for p in reports if not p.done]
            print(f"{len(reports) - len(missing)}/{len(reports)} snippet × target pairs verified since {args.since}", flush=True)
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(5)
    for p in reports:
        steps = " ".join(f"{k}={v}" for k, v in sorted(p.steps.items())) or "-"
        print(
            f"{'ok ' if p.done else 'MISSING'} {p.snippet_id:28} {p.target:8} {p.mode:12} {steps:28} {p.host} {p.gpu} {p.isolation} {'-' if p.after_s is None else f'+{p.after_s}s'}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(p) | {"done": p.done} for p in reports], f, indent=1)
    return 0 if not missing else 1


if __name__ == "__main__":
    sys.exit(main())
