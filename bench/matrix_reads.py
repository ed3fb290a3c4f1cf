"""Time the matrix's read paths (issue 24) on one tree: `/api/changes`, a snippet's `/matrix`, a page with matrix lines.

    .venv/bin/python bench/matrix_reads.py                      # this tree
    .venv/bin/python bench/matrix_reads.py --repo /tmp/base     # another tree (e.g. `git archive` of a baseline)

It indexes the bundled wiki/ and evidence/ (the committed matrix included) into a fresh SQLite file, serves the app
in-process (Starlette's TestClient) and prints the median milliseconds of each request over --rounds, after one
warm-up. Compare two trees in the same run (the machine is shared): the ratios, not the milliseconds, are the result.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REQUESTS = (
    "/api/changes?limit=500",
    "/api/changes?page=hw-tma",
    "/api/snippets/hw-tma:1/matrix",
    "/api/snippets/hw-tma:1/sass",
    "/pages/hw-tma",
    "/changes",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    repo = args.repo.resolve()
    sys.path.insert(0, str(repo))
    from fastapi.testclient import TestClient

    from app.main import create_app, prepare_store
    from app.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="kw-matrix-bench-"))
    try:
        shutil.copytree(repo / "wiki", tmp / "wiki")
        shutil.copytree(repo / "evidence", tmp / "evidence")
        settings = Settings(wiki=tmp / "wiki", evidence=tmp / "evidence", db=f"sqlite:///{tmp / 'index.db'}", runner_token=None)
        store = prepare_store(settings)
        out: dict[str, float] = {}
        with TestClient(create_app(settings, store=store), base_url="http://127.0.0.1:8000") as client:
            for url in REQUESTS:
                assert client.get(url).status_code == 200, url
                times = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    client.get(url)
                    times.append((time.perf_counter() - started) * 1000)
                out[url] = round(statistics.median(times), 2)
        store.engine.dispose()
        print(json.dumps({"repo": str(repo), "median_ms": out}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
