"""CPU time of one search, in process, for several checkouts of the code on the same index: a before/after on a busy machine.

    .venv/bin/python bench/bench_search_cpu.py --data /tmp/kw-cpu --checkout base=/path/to/old/checkout --rounds 3

Builds bench/bench_index.py's synthetic wiki (`--pages`) and its index once into `--data` (kept, reused),
then runs the distinct-query stream of bench/bench_search_serve.py through `Store.search` (result cache
off, `limit=10`) in a child process per checkout (`PYTHONPATH`), the checkouts alternating in each of
`--rounds` rounds, each child with the same queries after the same warm-up. The figure is the searching
thread's CPU time (`time.thread_time`) per search: on a machine shared with other work, wall time mostly
measures the wait for a core, CPU time much less so. `this` is the checkout the script is in.
A checkout reads the same SQL index and full-text folder, so every one must read its format.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def child(data: Path, queries: int, warm: int) -> None:
    """Measure in this process (the code on sys.path) and print one JSON line."""
    from app.index.filters import Filters
    from app.search import SearchEngine
    from app.store import Store
    from bench.bench_search_serve import corpus_words, distinct_stream

    store = Store(f"sqlite:///{data / 'index.db'}", search_engine=SearchEngine(cache_size=0, refresh_s=1e9))
    search = getattr(store, "searcher", store).search  # older checkouts searched through the Store itself
    stream = distinct_stream(corpus_words(data / "wiki"), warm + queries)
    for q in stream[:warm]:
        search(q, Filters(), limit=10)
    took = []
    for q in stream[warm:]:
        started = time.thread_time()
        search(q, Filters(), limit=10)
        took.append(time.thread_time() - started)
    took.sort()
    print(
        json.dumps(
            {
                "mean_ms": sum(took) / len(took) * 1000,
                "p50_ms": took[len(took) // 2] * 1000,
                "p99_ms": took[int(len(took) * 0.99)] * 1000,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the wiki and index, built here when missing")
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", action="append", default=[], help="LABEL=DIR: another checkout to measure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = args.data.resolve()
    if args.child:
        child(data, args.queries, args.warm)
        return
    if not (data / "index.db").exists():
        from app.search import SearchEngine
        from app.store import Store
        from bench.bench_index import generate

        generate(data / "wiki", args.pages)
        store = Store(f"sqlite:///{data / 'index.db'}", search_engine=SearchEngine(cache_size=0))
        store.create_schema()
        store.reindex(data / "wiki")
        store.engine.dispose()
    checkouts = [("this", REPO)] + [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.checkout]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in checkouts}
    for n in range(args.rounds):
        for label, path in checkouts if n % 2 == 0 else list(reversed(checkouts)):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--data", str(data)]
            cmd += ["--queries", str(args.queries), "--warm", str(args.warm)]
            env = {**os.environ, "PYTHONPATH": str(path)}
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800).stdout
            results[label].append(json.loads(out.strip().splitlines()[-1]))
            r = results[label][-1]
            print(
                f"round {n + 1} {label:10} mean {r['mean_ms']:.3f} ms  p50 {r['p50_ms']:.3f}  p99 {r['p99_ms']:.3f} (CPU)",
                flush=True,
            )
    first = statistics.median(r["mean_ms"] for r in results["this"])
    for label, rs in results.items():
        mean = statistics.median(r["mean_ms"] for r in rs)
        print(f"{label:10} median of the rounds' mean CPU per search {mean:.3f} ms  ({mean / first:.2f}× this)")


if __name__ == "__main__":
    main()
