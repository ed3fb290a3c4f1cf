"""Two checkouts' per-request cost through the whole app, alternated in one run: a refactor's before and after.

    git archive main | tar -x -C /tmp/kw-base       # the baseline tree (any checkout of this repository)
    .venv/bin/python bench/bench_asgi_ab.py --base /tmp/kw-base --pages 2000 --requests 1000 --rounds 6

Builds bench/bench_index.py's synthetic wiki once, indexes it once per tree (`kernelwiki index`, each tree's own
code and database), then, in rounds that alternate which tree goes first, starts a fresh process per tree that
drives the app's ASGI callable directly (no client library, no socket, the lifespan run) through `--requests`
requests of each workload: `hot` (the 8-query mix of bench/bench_search_serve.py) and `distinct` (the corpus's
own 1-2 word queries) through the lean `/api/search` path, `declared` (the same search with a repeated `limit`,
which the lean path leaves to FastAPI's declared route and its dependencies), `pages` (`/api/pages` windows) and
`page` (`/api/pages/{id}`). The search cache is off. Reports, per workload, the median over rounds of the CPU time
per request (`time.process_time`, the figure least moved by other load on the machine) and of the wall time, and
the ratio of this checkout's to the baseline's. Both trees run with this checkout's virtual environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

WORKLOADS = ("hot", "distinct", "declared", "pages", "page")
KERNELWIKI = "import sys; from app.cli.main import main; sys.argv[0] = 'kernelwiki'; sys.exit(main())"


def _urls(queries: dict[str, list[str]]) -> dict[str, list[str]]:
    search = "/api/search?limit=10&q="
    return {
        "hot": [search + quote(q) for q in queries["hot"]],
        "distinct": [search + quote(q) for q in queries["distinct"]],
        "declared": [search + quote(q) + "&limit=10" for q in queries["hot"]],  # repeated: the lean path declines
        "pages": [f"/api/pages?limit=20&offset={i * 20}" for i in range(50)],
        "page": [f"/api/pages/{p}" for p in queries["pages"]],
    }


def child(folder: Path, name: str, requests: int) -> None:
    """One arm, in a process of its own whose `app` is the tree on PYTHONPATH: print one RESULT line."""
    from app.main import create_app, prepare_store
    from app.settings import Settings

    settings = Settings(
        wiki=folder / "wiki",
        evidence=folder / "evidence",
        db=f"sqlite:///{folder / (name + '.db')}",
        runner_token=None,
        search_cache_size=0,
        access_log=False,
    )
    store = prepare_store(settings)
    app = create_app(settings, store=store)
    work = _urls(json.loads((folder / "queries.json").read_text()))

    async def get(url: str) -> int:
        path, _, query = url.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"bench")],
            "client": ("127.0.0.1", 1),
            "server": ("bench", 80),
            "state": {},
        }
        status = 0

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(scope, receive, send)
        return status

    async def run() -> dict[str, dict[str, float]]:
        out = {}
        async with app.router.lifespan_context(app):
            for kind in WORKLOADS:
                urls = work[kind]
                for url in urls[:50]:  # warm, and every answer a 200
                    status = await get(url)
                    if status != 200:
                        raise SystemExit(f"{name}: {url} answered {status}")
                cpu, wall = time.process_time(), time.perf_counter()
                for i in range(requests):
                    await get(urls[i % len(urls)])
                out[kind] = {
                    "cpu_us": (time.process_time() - cpu) * 1e6 / requests,
                    "wall_us": (time.perf_counter() - wall) * 1e6 / requests,
                }
        return out

    result = asyncio.run(run())
    store.engine.dispose()
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the baseline checkout")
    parser.add_argument("--new", type=Path, default=REPO, help="the checkout measured against it (this one)")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=1000, help="per workload, per arm")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.requests)
        return

    from bench.bench_index import generate
    from bench.bench_search_serve import HOT, corpus_words, distinct_stream

    trees = {"base": args.base.resolve(), "new": args.new.resolve()}
    folder = Path(tempfile.mkdtemp(prefix="kw-asgi-ab-"))
    try:
        generate(folder / "wiki", args.pages)
        (folder / "evidence").mkdir()
        page_ids = [
            m.group(1)
            for p in sorted((folder / "wiki").rglob("*.md"))[:50]
            if (m := re.search(r"^id: (.+)$", p.read_text(), re.M))
        ]
        stream = distinct_stream(corpus_words(folder / "wiki"), 3000)
        (folder / "queries.json").write_text(json.dumps({"hot": list(HOT), "distinct": stream, "pages": page_ids}))
        for name, tree in trees.items():
            env = {
                **os.environ,
                "PYTHONPATH": str(tree),
                "KERNELWIKI_WIKI": str(folder / "wiki"),
                "KERNELWIKI_EVIDENCE": str(folder / "evidence"),
                "KERNELWIKI_DB": f"sqlite:///{folder / (name + '.db')}",
            }
            subprocess.run(
                [sys.executable, "-c", KERNELWIKI, "index"], env=env, cwd=tree, check=True, timeout=1800, capture_output=True
            )
        found: dict[tuple[str, str], list[dict[str, float]]] = {}
        for r in range(args.rounds):
            for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
                proc = subprocess.run(
                    [sys.executable, str(REPO / "bench" / "bench_asgi_ab.py"), "--base", str(trees["base"])]
                    + ["--requests", str(args.requests), "--child", str(folder), name],
                    env={**os.environ, "PYTHONPATH": str(trees[name])},
                    cwd=trees[name],
                    capture_output=True,
                    text=True,
                    timeout=1800,
                )
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
                if line is None:
                    sys.exit(f"{name} arm failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
                for kind, figures in json.loads(line[len("RESULT ") :]).items():
                    found.setdefault((kind, name), []).append(figures)
        print(f"{args.pages} pages, {args.requests} requests per workload and arm, {args.rounds} rounds; search cache off")
        print("| workload | base CPU µs | new CPU µs | CPU ratio | base wall µs | new wall µs | wall ratio |")
        print("|---|---|---|---|---|---|---|")
        for kind in WORKLOADS:
            cpu = {n: statistics.median(f["cpu_us"] for f in found[(kind, n)]) for n in trees}
            wall = {n: statistics.median(f["wall_us"] for f in found[(kind, n)]) for n in trees}
            print(
                f"| {kind} | {cpu['base']:.0f} | {cpu['new']:.0f} | {cpu['new'] / cpu['base']:.3f} "
                f"| {wall['base']:.0f} | {wall['new']:.0f} | {wall['new'] / wall['base']:.3f} |"
            )
        for kind in WORKLOADS:
            runs = {n: [round(f["cpu_us"]) for f in found[(kind, n)]] for n in trees}
            print(f"{kind}: CPU µs per round, base {runs['base']}, new {runs['new']}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
