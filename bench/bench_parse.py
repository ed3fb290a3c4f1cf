"""CPU per page of parsing, rendering and extracting (what `kernelwiki index`'s parse workers do), in one process.

    .venv/bin/python bench/bench_parse.py --pages 10000 --snippet-every 2
    PYTHONPATH=<another checkout> .venv/bin/python bench/bench_parse.py --pages 10000 --snippet-every 2   # to compare

Generates bench/bench_index.py's synthetic wiki, then times `app.index.build.prepare` (parse, outline,
extract, rows) over every fourth page with `time.process_time` (CPU, which other load inflates less than wall time).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--snippet-every", type=int, default=2)
    parser.add_argument("--postgres", action="store_true", help="make rows as COPY text, as for PostgreSQL")
    args = parser.parse_args()
    import app
    from app.index.build import Setting, Task, prepare

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "wiki"
        generate(root, args.pages, snippet_every=args.snippet_every)
        files = sorted(root.rglob("*.md"))[::4]
        items = [(str(p.relative_to(root)), p.read_bytes()) for p in files]
    work = [Task(rel, raw, hashlib.sha256(raw).hexdigest()) for rel, raw in items]
    setting = Setting(str(root), None, copy=args.postgres)  # rows as PostgreSQL's COPY text, or as SQLite's tuples
    for item in work[:20]:  # parsers built, modules imported
        prepare(item, setting)
    started = time.process_time()
    for item in work:
        prepare(item, setting)
    per_page = (time.process_time() - started) / len(work) * 1000
    print(f"{per_page:.3f} ms of CPU a page over {len(work)} pages ({Path(app.__file__).parent.parent})")


if __name__ == "__main__":
    main()
