"""Run every benchmark of bench/ once, at small sizes by default (`make bench`).

    .venv/bin/python bench/run.py                 # all, small sizes (a few minutes on 2 cores)
    .venv/bin/python bench/run.py --full          # the sizes docs/benchmarks.md quotes (long)
    .venv/bin/python bench/run.py --only index web

Each benchmark is its own script (see its docstring for what it measures and its
baseline); this only runs them one after the other, each in its own process with
a time limit, shows their output and says which failed. The small sizes check
that every benchmark still works and give rough ratios; the figures in
docs/benchmarks.md come from the full sizes. The PostgreSQL benchmarks need the
server of KERNELWIKI_TEST_PG; without it they are reported as skipped (a failure
under CI=true). The verification benchmark needs nvcc; without it, likewise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_TIMEOUT_S = 1800
"""Limit of one benchmark at full size; small sizes finish in well under a minute each on 2 cores."""

PG_URL = os.environ.get("KERNELWIKI_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    small: tuple[str, ...]  # arguments for the quick run
    needs: str = ""  # "postgres", "nvcc" or "wrk+datasette"


BENCHES = (
    Bench("index", "bench_index.py", ("--pages", "500", "--rounds", "3", "--seconds", "2")),
    Bench("web", "bench_web.py", ("--repeat", "3")),
    Bench("cli_start", "bench_cli_start.py", ("--rounds", "1")),
    Bench("verify", "bench_verify.py", ("--wiki", str(REPO / "tests" / "fixtures" / "wiki")), needs="nvcc"),
    Bench("compile_batch", "bench_compile_batch.py", ("--limit", "3"), needs="nvcc"),
    Bench("queue", "bench_queue.py", ("--jobs", "200", "--workers", "2"), needs="postgres"),
    Bench("try_flood", "bench_try_flood.py", ("--tries", "40", "--verifications", "5", "--hold-ms", "100"), needs="postgres"),
    Bench(
        "search_serve", "bench_search_serve.py", ("--pages", "1000", "--seconds", "3", "--queries", "2000"), needs="wrk+datasette"
    ),
)


def missing(need: str) -> str | None:
    """Why a benchmark cannot run here, or None."""
    if need == "nvcc" and not (shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()):
        return "nvcc not found (the CUDA toolkit is not on PATH)"
    if need == "wrk+datasette":
        if shutil.which("wrk") is None:
            return "wrk not found (apt install wrk)"
        if not Path(sys.executable).with_name("datasette").exists():
            return "Datasette not installed (pip install -e '.[bench]')"
    if need == "postgres":
        try:
            from sqlalchemy import create_engine, text

            engine = create_engine(PG_URL)
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            engine.dispose()
        except Exception as exc:  # noqa: BLE001 - any failure to connect means 'not available'
            return f"PostgreSQL not reachable at {PG_URL} ({type(exc).__name__})"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="each benchmark's own default sizes (long)")
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], help="run only these")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.name in args.only]
    in_ci = os.environ.get("CI") == "true"
    results: list[tuple[str, str, float]] = []
    for bench in chosen:
        reason = missing(bench.needs) if bench.needs else None
        if reason:
            results.append((bench.name, f"{'FAILED' if in_ci else 'skipped'}: {reason}", 0.0))
            continue
        argv = [sys.executable, str(REPO / "bench" / bench.script), *([] if args.full else bench.small)]
        print(f"==> bench {bench.name}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=REPO, timeout=BENCH_TIMEOUT_S, check=False)
            status = "ok" if done.returncode == 0 else f"FAILED: exit status {done.returncode}"
        except subprocess.TimeoutExpired:
            status = f"FAILED: no result within {BENCH_TIMEOUT_S} s"
        results.append((bench.name, status, time.monotonic() - started))
    print("\nbenchmark      result")
    for name, status, seconds in results:
        print(f"{name:<14} {status}" + (f" ({seconds:.0f} s)" if seconds else ""))
    return 1 if any(status.startswith("FAILED") for _, status, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
