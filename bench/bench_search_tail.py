"""Where a search's slow tail comes from, in process: the garbage collector's pauses against the queries they hit.

    .venv/bin/python bench/bench_search_tail.py --pages 10000 --queries 6000

Builds bench/bench_index.py's synthetic wiki, indexes it and its full-text
index (a Store, as one serving process has), then runs the distinct-query
stream of bench/bench_search_serve.py through `Searcher.search` (app/search/searcher.py) with the result
cache off, in two arms that alternate in rounds of 500 queries, each arm its
own queries: as the process is after loading, and after `gc.freeze()`. Reports per arm p50/p99/max of one search, the
collections that ran (by generation) with their total and longest pause, and
how many of the slowest 1% of searches overlapped a collection. No HTTP: the
event loop and the thread pool are measured by bench/bench_search_serve.py.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate  # noqa: E402
from bench.bench_search_serve import corpus_words, distinct_stream  # noqa: E402

ROUND = 500


class Pauses:
    """The garbage collector's pauses, from gc.callbacks: (start, end, generation)."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spans.append((self._start, time.perf_counter(), int(info["generation"])))


def run(store: Any, queries: list[str], pauses: Pauses) -> list[tuple[float, float]]:
    from app.index.filters import Filters

    spans = []
    for q in queries:
        started = time.perf_counter()
        store.searcher.search(q, Filters(), limit=10)
        spans.append((started, time.perf_counter()))
    return spans


def report(name: str, spans: list[tuple[float, float]], pauses: list[tuple[float, float, int]]) -> None:
    took = sorted((e - s) * 1000 for s, e in spans)
    p = lambda q: took[min(len(took) - 1, int(q * len(took)))]  # noqa: E731
    slow = sorted(spans, key=lambda se: se[1] - se[0])[-max(1, len(spans) // 100) :]
    hit = sum(1 for s, e in slow if any(ps < e and pe > s for ps, pe, _g in pauses))
    by_gen = {g: [(pe - ps) * 1000 for ps, pe, gg in pauses if gg == g] for g in (0, 1, 2)}
    gens = "  ".join(f"gen{g}: {len(v)} × (total {sum(v):.1f} ms, max {max(v, default=0):.2f} ms)" for g, v in by_gen.items())
    print(
        f"{name:9} {len(took)} searches  p50 {statistics.median(took):.2f} ms  p99 {p(0.99):.2f} ms  max {took[-1]:.1f} ms  "
        f"| slowest 1% overlapping a collection: {hit}/{len(slow)}  | {gens}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=6_000)
    args = parser.parse_args()
    from app.search import SearchEngine
    from app.store import Store

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        generate(tmp / "wiki", args.pages)
        store = Store(f"sqlite:///{tmp / 'index.db'}", search_engine=SearchEngine(cache_size=0, refresh_s=1.0))
        store.create_schema()
        store.reindex(tmp / "wiki")
        stream = distinct_stream(corpus_words(tmp / "wiki"), args.queries)
        run(store, stream[:200], Pauses())  # warm-up
        pauses = Pauses()
        gc.callbacks.append(pauses)
        arms: dict[str, list[tuple[float, float]]] = {"as loaded": [], "frozen": []}
        for n, start in enumerate(range(0, len(stream), 2 * ROUND)):
            chunk = stream[start : start + 2 * ROUND]
            order = list(arms) if n % 2 == 0 else list(reversed(arms))  # neither arm always goes first
            for i, arm in enumerate(order):
                if arm == "frozen":
                    gc.freeze()
                arms[arm] += run(store, chunk[i::2], pauses)  # each arm its own queries: no word cache shared
                gc.unfreeze()
        gc.callbacks.remove(pauses)
        for arm, spans in arms.items():
            starts = [s for s, _e in spans]
            report(arm, spans, [sp for sp in pauses.spans if _within(sp[0], starts, spans)])
        store.engine.dispose()


def _within(at: float, starts: list[float], spans: list[tuple[float, float]]) -> bool:
    """Whether time `at` falls in one of `spans` (sorted; `starts` their beginnings)."""
    i = bisect.bisect_right(starts, at) - 1
    return i >= 0 and spans[i][0] <= at <= spans[i][1]


if __name__ == "__main__":
    main()
