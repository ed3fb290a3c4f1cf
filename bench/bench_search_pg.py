"""Search latency on PostgreSQL next to SQLite, on the same synthetic wiki (issue: scale-out).

    .venv/bin/python bench/bench_search_pg.py --pages 10000 100000 [--dir /tmp/kwbench] [--no-related]

For each size: generate the wiki of bench/bench_index.py (about 3 kB a page,
6 sections, Zipf-distributed words, GPU identifiers), index it into SQLite and
into a fresh PostgreSQL database with the real indexer, then time
`Store.search` in-process (p50/p99 over its query mix, which includes a typo
query) on each backend. In-process timing leaves HTTP out, so the figures
compare the backends themselves; one JSON line per size and backend.
`--no-related` drops the pages' `related` links (they play no part in
search; see docs/benchmarks.md for why the 100,000-page figures used it). Needs the PostgreSQL server of
KERNELWIKI_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import QUERIES, generate, percentile  # noqa: E402

PG_ADMIN = os.environ.get("KERNELWIKI_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def timed_search(store, rounds: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """p50/p99 of Store.search over the query mix (after one warm-up pass), and its slowest query."""
    from app.store import Filters

    for q in QUERIES:
        store.search(q, Filters())
    times: list[float] = []
    per_query: dict[str, list[float]] = {q: [] for q in QUERIES}
    for _ in range(rounds):
        for q in QUERIES:
            started = time.perf_counter()
            store.search(q, Filters())
            ms = (time.perf_counter() - started) * 1000
            times.append(ms)
            per_query[q].append(ms)
    slowest = max(per_query, key=lambda q: sorted(per_query[q])[len(per_query[q]) // 2])
    return {
        "p50_ms": round(percentile(times, 50), 2),
        "p99_ms": round(percentile(times, 99), 2),
        "slowest_query": slowest,
        "slowest_query_p50_ms": round(percentile(per_query[slowest], 50), 2),
    }


def prepare_wiki(root: Path, pages: int, related: bool) -> float:
    """Generate the wiki (unless `root` already holds one); without `related` links when asked. Seconds taken."""
    started = time.perf_counter()
    if not (root / ".complete").exists():
        generate(root, pages)
        (root / ".complete").write_text(str(pages))
    if not related:
        for path in root.rglob("*.md"):
            text = path.read_text()
            if "\nrelated: " in text:
                path.write_text("\n".join(l for l in text.split("\n") if not l.startswith("related: ")))
    return time.perf_counter() - started


def bench_backend(backend: str, root: Path, work: Path, rounds: int) -> dict[str, object]:
    """Index `root` into a fresh database of `backend` and time searches."""
    from sqlalchemy import create_engine, text

    from app.store import Store

    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    name = f"kw_bench_{uuid.uuid4().hex[:8]}"
    if backend == "postgres":
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    else:
        url = f"sqlite:///{work}/bench-{uuid.uuid4().hex[:8]}.db"
    try:
        store = Store(url)
        store.create_schema()
        report = store.reindex(root)
        if backend == "postgres":
            with store.engine.connect() as conn:  # fresh statistics, as autovacuum would give a live server
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")
        result = {"index_s": round(report.seconds, 1), **timed_search(store, rounds)}
        store.engine.dispose()
        return result
    finally:
        if backend == "postgres":
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        else:
            Path(url.split("///", 1)[1]).unlink(missing_ok=True)
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=20, help="passes over the query mix")
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--dir", type=Path, help="keep the generated wikis here and reuse them (default: a temporary folder)")
    parser.add_argument("--no-related", action="store_true", help="leave the pages' `related` links out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for pages in args.pages:
            generate_s = prepare_wiki(work / f"wiki-{pages}", pages, related=not args.no_related)
            for backend in args.backends:
                result = bench_backend(backend, work / f"wiki-{pages}", work, args.rounds)
                print(json.dumps({"pages": pages, "backend": backend, "related_links": not args.no_related,
                                  "generate_s": round(generate_s, 1), **result}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
