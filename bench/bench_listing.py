"""Listing, dashboard and graph views at wiki scale (issue 9): each must cost the same at 10,000 pages.

    .venv/bin/python bench/bench_listing.py [--pages 10000] [--snippet-every 2] [--repeat 20]

Builds the synthetic wiki of bench/bench_index.py, gives every `--snippet-every`-th page a
compiled CUDA block (targets sm_90a and sm_100a), indexes it into SQLite, adds a typical
verification run for every snippet (compile pass on both, run on the H200, run skipped on
sm_100a: bench/records.py), then times each view through the whole ASGI stack in
process (FastAPI TestClient): the first request (caches empty: the status index, facets,
graph layout are built) and the median of `--repeat` warm ones. The baseline is
`/api/health` measured the same way; `ratio` is a view's warm median over the baseline's.
Targets: home, /evidence, /api/snippets, /api/pages under 100 ms; /graph, /api/graph under 1 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

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
]


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
    args = parser.parse_args()

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from app.store import Store
    from bench.bench_index import generate
    from bench.records import typical

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "wiki"
        generate(root, args.pages)
        snippets = add_snippets(root, args.snippet_every)
        settings = Settings(wiki=root, db=f"sqlite:///{tmp}/index.db", evidence=Path(tmp) / "none", index_on_start=False)
        store = Store(settings.db)
        store.create_schema()
        started = time.perf_counter()
        report = store.reindex(root)
        index_s = time.perf_counter() - started
        with store.engine.connect() as conn:
            rows = [s.model_dump() for s in store.evidence.snippets_with_evidence(conn)]
        records = typical(rows)
        for i in range(0, len(records), 5000):
            store.evidence.add(records[i : i + 5000])
        store.engine.dispose()
        app = create_app(settings)
        results: dict[str, dict[str, float]] = {}
        with TestClient(app) as client:
            for _ in range(1200):  # the app opens (and may index) in the background
                if client.get("/api/pages?limit=1").status_code == 200:
                    break
                time.sleep(0.25)
            for path in VIEWS:
                w = time.perf_counter()
                status = client.get(path).status_code
                first = (time.perf_counter() - w) * 1000
                assert status == 200, (path, status)
                warm = []
                for _ in range(args.repeat):
                    w = time.perf_counter()
                    client.get(path)
                    warm.append((time.perf_counter() - w) * 1000)
                results[path] = {"first_ms": round(first, 1), "median_ms": round(statistics.median(warm), 2)}
    base = results["/api/health"]["median_ms"]
    print(
        f"{args.pages} pages, {snippets} snippets, {len(records)} evidence records; SQL index built in {index_s:.1f} s "
        f"({len(report.added)} pages); {args.repeat} warm requests per view"
    )
    print(f"{'view':42} {'first':>9} {'warm':>9} {'ratio':>6}")
    for path, r in results.items():
        r["ratio"] = round(r["median_ms"] / base, 1) if base else float("nan")
        print(f"{path:42} {r['first_ms']:7.1f}ms {r['median_ms']:7.2f}ms {r['ratio']:5.1f}x")
    if args.json:
        args.json.write_text(
            json.dumps({"pages": args.pages, "snippets": snippets, "records": len(records), "results": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
