"""Where a cold `verify --compile-only` of the wiki spends its time: every sandboxed process, by tool.

    .venv/bin/python bench/bench_compile_profile.py [--wiki wiki] [--jobs 2] [--isolation bwrap] [--json out.json]
        [--records out.jsonl]

Runs one cold compile-only verification (an empty result cache of its own, as
`make verify-compile` in a clean clone) and records each process the runner
starts through the sandbox: the tool (nvcc, ptxas, cuobjdump, python), how many
targets one nvcc run built (`-gencode` count), whether it was the relocatable
or the whole-program build, and its wall-clock seconds. It prints the totals
per kind, the number of processes per snippet × target pair, the slowest ten
units, and (for `--isolation none`, where the runner waits for its children
directly) the CPU seconds they used. Isolation `bwrap` hides the children's CPU
time from getrusage (they are reaped inside the sandbox's pid namespace): use
`--isolation none` for CPU figures and `bwrap` for the wall clock CI sees.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _kind(argv: list[str]) -> str:
    """nvcc-rdc×N, nvcc-program×N, nvcc-host, ptxas, cuobjdump, nvdisasm, python: what one process was."""
    tool = os.path.basename(argv[0]) if argv else "?"
    if tool != "nvcc":
        return tool
    gencodes = sum(1 for a in argv if a.startswith("-gencode="))
    if not gencodes:
        return "nvcc-host"
    return f"nvcc-{'rdc' if '-rdc=true' in argv else 'program'}×{gencodes}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default=str(REPO / "wiki"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--isolation", default="bwrap")
    parser.add_argument("--json", type=Path, default=None, help="also write every process as JSON here")
    parser.add_argument("--records", type=Path, default=None, help="also write the evidence records (JSONL) here")
    args = parser.parse_args()

    from runner import sandbox
    from runner.verify import load_snippets, verify

    supervised = sys.modules[sandbox.run_process.__module__]
    original = supervised._supervise
    lock = threading.Lock()
    seen: list[dict[str, Any]] = []

    def timed(full: list[str], argv: list[str], *rest: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        out = original(full, argv, *rest, **kw)
        with lock:
            seen.append({"kind": _kind(argv), "wall_s": time.perf_counter() - started, "folder": str(rest[0])})
        return out

    supervised._supervise = timed  # type: ignore[attr-defined]
    snippets, _ = load_snippets(args.wiki)
    pairs = sum(len(s.targets) or 1 for s in snippets)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        report = verify(args.wiki, jobs=args.jobs, compile_only=True, cache_dir=Path(tmp), isolation=args.isolation)
        wall = time.perf_counter() - started
    if args.records is not None:
        report.write_jsonl(args.records)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for p in seen:
        by_kind[p["kind"]].append(p["wall_s"])
    statuses = Counter(r.status for r in report.records if r.step == "compile")
    summary = {
        "load_average_at_end": os.getloadavg(),
        "isolation": args.isolation,
        "jobs": args.jobs,
        "snippet_target_pairs": pairs,
        "records": len(report.records),
        "compile_statuses": dict(statuses),
        "wall_s": round(wall, 1),
        "processes": len(seen),
        "process_wall_s": round(sum(p["wall_s"] for p in seen), 1),
        "children_cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
        "by_kind": {
            k: {"count": len(v), "wall_s": round(sum(v), 1), "mean_s": round(sum(v) / len(v), 2)}
            for k, v in sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))
        },
    }
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    if args.json is not None:
        args.json.write_text(json.dumps({"summary": summary, "processes": seen}, indent=1))


if __name__ == "__main__":
    main()
