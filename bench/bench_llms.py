"""`/llms-full.txt` and `/llms.txt` at scale: server CPU, wall time and bytes per anonymous GET.

    .venv/bin/python bench/bench_llms.py --pages 5000 [--rounds 3]

Writes a synthetic wiki (bench/bench_index.py's generator), indexes it, serves
it with uvicorn in its own process (no start-up index) and asks for each
document `rounds` times, one client: the server's CPU seconds per GET (from
/proc), its wall time and its size. Then the same document with the ETag of the
last answer in `If-None-Match` (a 304 where the service caches) and as HEAD.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate  # noqa: E402
from bench.proc import cpu_seconds, free_port, wait_idle  # noqa: E402


def timed(client: httpx.Client, pid: int, method: str, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    cpu, started = cpu_seconds(pid), time.perf_counter()
    response = client.request(method, path, headers=headers)
    wall = time.perf_counter() - started
    return {
        "status": response.status_code,
        "bytes": len(response.content),
        "wall_s": round(wall, 3),
        "server_cpu_s": round(cpu_seconds(pid) - cpu, 3),
        "etag": response.headers.get("etag"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from app.store import Store

    results: dict[str, Any] = {"pages": args.pages}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "wiki"
        generate(root, args.pages)
        db = f"sqlite:///{tmp}/index.db"
        store = Store(db)
        store.create_schema()
        store.reindex(root, full_text=False)
        store.engine.dispose()
        port = free_port()
        env = {**os.environ, "KERNELWIKI_INDEX_ON_START": "false", "KERNELWIKI_DB": db, "KERNELWIKI_WIKI": str(root)}
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "bench.serve_factory:app",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=env,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        client.get("/api/health")
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                wait_idle(server.pid)  # start-up work (full-text index, page warm-up) over
                for path in ("/llms-full.txt", "/llms.txt"):
                    gets = [timed(client, server.pid, "GET", path) for _ in range(args.rounds)]
                    etag = gets[-1]["etag"]
                    again = timed(client, server.pid, "GET", path, {"If-None-Match": etag}) if etag else None
                    head = timed(client, server.pid, "HEAD", path)
                    results[path] = {"gets": gets, "if_none_match": again, "head": head}
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
