"""Listing, dashboard and graph views at wiki scale (issue 9): each must cost the same at 10,000 pages.

    .venv/bin/python bench/bench_listing.py [--pages 10000] [--snippet-every 2] [--repeat 20]
    .venv/bin/python bench/bench_listing.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres

Builds the synthetic wiki of bench/bench_index.py, gives every `--snippet-every`-th page a
compiled CUDA block (targets sm_90a and sm_100a), indexes it into SQLite, adds a typical
verification run for every snippet (compile pass on both, run on the H200, run skipped on
sm_100a: bench/records.py), then times each view through the whole ASGI stack in
process (FastAPI TestClient): the first request after the app started and its background
warm-up ended (per-generation caches empty: facets and llms.txt are built; the warm-up drew /graph's most-linked
pages, app/web/warm.py), the median of `--repeat` warm ones, and the first request after a
reindex that changed one page (made by another Store, as `kernelwiki index` would: the index
generation moves, so every cache keyed by it is cold). Each figure is wall time; `cpu` is the
process's CPU time for the same request, plus on PostgreSQL the database backends' (on a loaded machine wall time includes waiting for a core).
The baseline is `/api/health` measured the same way; `ratio` is a view's warm median over the baseline's.
Targets (issue 26): home, /evidence, /api/snippets, /graph, /llms.txt under 100 ms from the first request,
after a start or a reindex. `--data DIR` keeps the built wiki and index there and reuses them on the next run.
`--postgres ADMIN_URL` indexes into a database of its own on that server instead (made for the run, dropped
after it; with `--data` the wiki is reused, the index is built again). The table prints, per view, the first
request after the start, the first after the reindex and the warm median ("steady"): wall ms with CPU ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SNIPPET = "\n## Kernel\n\n```cuda\n__global__ void k{i}(float* out) {{ out[threadIdx.x] = {i}.0f; }}\n```\n"
VIEWS = [
    "/api/health",
    "/",
    "/?arch=sm90",
    "/?offset=5000",
    "/evidence",
    "/evidence?status=pass",
    "/evidence?offset=5000",
    "/api/snippets?limit=20",
    "/api/snippets?status=pass&limit=20",
    "/api/pages",
    "/api/pages?offset=9000",
    "/api/pages?arch=sm90&type=hardware",
    "/graph",
    "/graph?page=page-42",
    "/api/graph",
    "/api/graph?page=page-42&depth=2",
    "/llms.txt",
]


class BackendCpu:
    """CPU time of the PostgreSQL server processes serving one database (its backends' /proc/<pid>/schedstat, ns):
    the SQL a view runs on PostgreSQL is spent there, not in the app's process. Same host only."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.engine = create_engine(url, poolclass=NullPool)
        self.conn = self.engine.connect()

    def ns(self) -> int:
        pids = self.conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).scalars()
        total = 0
        for pid in pids:
            try:
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a backend that ended meanwhile
        return total

    def close(self) -> None:
        self.conn.close()
        self.engine.dispose()


def timed(client: Any, path: str, backend: BackendCpu | None = None) -> tuple[float, float]:
    """One request: (wall ms, CPU ms of the app's process plus, on PostgreSQL, of the database's backends); asserts a 200."""
    b = backend.ns() if backend else 0
    w, c = time.perf_counter(), time.process_time()
    status = client.get(path).status_code
    took = time.perf_counter() - w, time.process_time() - c
    server_s = (backend.ns() - b) / 1e9 if backend else 0.0
    assert status == 200, (path, status)
    return took[0] * 1000, (took[1] + server_s) * 1000


def add_snippets(root: Path, every: int) -> int:
    """Append one compiled block to every `every`-th page (the page's architectures give sm_90a / sm_100a)."""
    count = 0
    for i, path in enumerate(sorted(root.rglob("*.md"))):
        if every and i % every == 0:
            text = path.read_text().replace("architectures: [", "architectures: [sm90a, sm100a, ", 1)
            path.write_text(text + SNIPPET.format(i=i))
            count += 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--snippet-every", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=None, help="keep the wiki and index here (reused when present)")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="index into a fresh database on this PostgreSQL server")
    args = parser.parse_args()

    from app.settings import Settings
    from app.store import Store
    from bench.bench_index import generate, postgres_database
    from bench.records import typical

    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(args.data.resolve()) if args.data else scratch
        root = Path(tmp) / "wiki"
        db, drop = postgres_database(args.postgres) if args.postgres else (f"sqlite:///{tmp}/index.db", lambda: None)
        settings = Settings(wiki=root, db=db, evidence=Path(tmp) / "none", index_on_start=False)
        saved_path = Path(tmp) / "built.json"
        wiki_made = saved_path.exists()
        if wiki_made and not args.postgres:
            saved = json.loads(saved_path.read_text())
            snippets, index_s, added, n_records = saved["snippets"], saved["index_s"], saved["added"], saved["records"]
        else:
            if wiki_made:
                snippets = json.loads(saved_path.read_text())["snippets"]
            else:
                generate(root, args.pages)
                snippets = add_snippets(root, args.snippet_every)
            store = Store(settings.db)
            store.create_schema()
            started = time.perf_counter()
            report = store.reindex(root)
            index_s = time.perf_counter() - started
            added = len(report.added)
            with store.engine.connect() as conn:
                rows = [s.model_dump() for s in store.evidence.snippets_with_evidence(conn)]
            records = typical(rows)
            for i in range(0, len(records), 5000):
                store.evidence.add(records[i : i + 5000])
            store.engine.dispose()
            n_records = len(records)
            if args.data and not wiki_made:
                saved = {"snippets": snippets, "index_s": index_s, "added": added, "records": n_records}
                saved_path.write_text(json.dumps(saved))
        try:
            results = measure(settings, root, args.repeat)
        finally:
            drop()
    base = results["/api/health"]["median_ms"]
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"{args.pages} pages, {snippets} snippets, {n_records} evidence records; {backend} index built in {index_s:.1f} s "
        f"({added} pages); {args.repeat} warm requests per view; ms wall (cpu: the app's process"
        + (" + the database's PostgreSQL backends)" if args.postgres else ")")
    )
    print(f"{'view':42} {'first after start':>18} {'first after reindex':>20} {'steady (median)':>18} {'ratio':>6}")
    for path, r in results.items():
        r["ratio"] = round(r["median_ms"] / base, 1) if base else float("nan")
        print(
            f"{path:42} {r['first_ms']:8.1f} ({r['first_cpu_ms']:6.1f}) {r['after_reindex_ms']:10.1f} ({r['after_reindex_cpu_ms']:6.1f}) "
            f"{r['median_ms']:8.2f} ({r['median_cpu_ms']:6.2f}) {r['ratio']:5.1f}x"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"pages": args.pages, "backend": backend, "snippets": snippets, "records": n_records, "results": results},
                indent=2,
            )
        )
    return 0


def measure(settings: Any, root: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Each view's first request after the app started, its warm median, then its first after another Store's reindex."""
    backend = BackendCpu(settings.db) if settings.db.startswith("postgresql") else None
    try:
        return _measure(settings, root, repeat, backend)
    finally:
        if backend:
            backend.close()


def _measure(settings: Any, root: Path, repeat: int, backend: BackendCpu | None) -> dict[str, dict[str, float]]:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.store import Store

    app = create_app(settings)
    results: dict[str, dict[str, float]] = {}
    with TestClient(app) as client:
        for _ in range(1200):  # the app opens (and may index) in the background
            if client.get("/api/health").status_code == 200:
                break
            time.sleep(0.25)
        # Start-up ends with the background warm-up (templates, lexers, the first pages' bodies: app/web/warm.py);
        # a request during it shares the CPU (and the GIL) with it, and its process CPU time would count it.
        warm_s = time.perf_counter()
        app.state.web.warmed.wait(120)
        app.state.web.prerendered.wait(120)
        app.state.warm_done.wait(120)  # then /llms.txt, and the start-up objects frozen out of the collector's way
        print(f"start-up warm-up ended {time.perf_counter() - warm_s:.1f} s after the app answered", flush=True)
        for path in VIEWS:
            first, first_cpu = timed(client, path, backend)
            warm = [timed(client, path, backend) for _ in range(repeat)]
            results[path] = {
                "first_ms": round(first, 1),
                "first_cpu_ms": round(first_cpu, 1),
                "median_ms": round(statistics.median(w for w, _ in warm), 2),
                "median_cpu_ms": round(statistics.median(c for _, c in warm), 2),
            }
        # A reindex by another process that changes one page: the index generation moves.
        page = next(root.rglob("page-7.md"))
        original = page.read_text()
        page.write_text(original.replace("\n## ", f"\nA changed line ({time.time_ns()}).\n\n## ", 1))  # new each run
        other = Store(settings.db)
        try:
            other.reindex(root)
        finally:
            other.engine.dispose()
            page.write_text(original)
        for path in VIEWS:
            after, after_cpu = timed(client, path, backend)
            results[path]["after_reindex_ms"] = round(after, 1)
            results[path]["after_reindex_cpu_ms"] = round(after_cpu, 1)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
