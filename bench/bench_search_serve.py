"""Search served over HTTP at 10,000 pages: kernelwiki (tantivy) against Datasette (SQLite FTS5), in one run.

    .venv/bin/pip install 'datasette>=0.64,<1'      # or: pip install -e '.[bench]'
    .venv/bin/python bench/bench_search_serve.py --pages 10000 --seconds 15
    .venv/bin/python bench/bench_search_serve.py --pages 100000 --snippet-every 2 --workers 2 --seconds 10 \
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres            # issue 26: 100k pages on PostgreSQL

Builds bench/bench_index.py's synthetic wiki, indexes it (`kernelwiki index`),
serves it with `kernelwiki serve` (one process), and serves the same pages'
titles and bodies with Datasette from an SQLite FTS5 table through the ranked
query `select id, title, snippet(...) from fts where fts match :q order by
bm25(fts) limit 10`. `wrk` (apt install wrk) drives each server in turn with:

- hot: the 8-query mix of issue 9, over and over;
- distinct: 20,000 queries of 1-2 words drawn from the corpus's own word
  frequencies (seeded), each thread walking the stream from its own offset;

at 8 and at 64 connections. kernelwiki runs with its result cache off
(KERNELWIKI_SEARCH_CACHE_SIZE=0) for every figure, once per `--workers` count
(`serve --workers N`), then once more with the cache on for the hot mix
(labelled `cached`), and without its access log
(KERNELWIKI_ACCESS_LOG=false; `datasette serve` has no such switch and logs
every request, to /dev/null here). Both servers answer the top 10
with an excerpt; words reach FTS5 quoted ("w1" "w2", an AND), so no query is a
syntax error there. Errors are wrk's socket errors plus non-2xx answers.
Each server is measured once its start-up work (index build, page warm-up) is
over: under 5% CPU for a second.

`--postgres ADMIN_URL` indexes into a database of its own on that server (made for
the run, dropped after it) instead of an SQLite file; Datasette's FTS5 copy is made
from the same rows. `--db URL` indexes into a database made beforehand and keeps it
(a second run finds the pages unchanged and skips to serving). After each kernelwiki server's runs the resident memory of its
processes is read (/proc/<pid>/smaps_rollup: RSS, PSS, private, anonymous), and the time from
its start to its first search answer is printed (the host's full-text index is
built then, by the first server on a fresh database).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate, postgres_database  # noqa: E402
from bench.proc import children, descendants, memory_mb, wait_idle  # noqa: E402

HOT = [
    "wgmma",
    "tensor core",
    "cp.async",
    "mbarrier parity",
    "swizzle bank conflict",
    "tcgen05",
    "alias4242",
    "setmaxnreg warpgroup",
]
DISTINCT = 20_000
WORD = re.compile(r"[a-z][a-z0-9_]+")
FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
KW_BIN = REPO / ".venv" / "bin" / "kernelwiki"

WRK_SCRIPT = r"""
local queries = {}
local counter = 0
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  for line in io.lines(args[1]) do queries[#queries + 1] = line end
  counter = tid * math.floor(#queries / 4)
end
function request()
  counter = counter + 1
  return wrk.format("GET", queries[(counter % #queries) + 1])
end
function done(summary, latency, requests)
  io.write(string.format('WRK {"requests": %d, "duration_us": %d, "socket_errors": %d, "status_errors": %d, "timeouts": %d, "p50_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, summary.errors.connect + summary.errors.read + summary.errors.write,
    summary.errors.status, summary.errors.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def corpus_words(root: Path) -> Counter[str]:
    """Word frequencies of the pages' bodies (front matter left out)."""
    counts: Counter[str] = Counter()
    for path in root.rglob("*.md"):
        counts.update(WORD.findall(FRONT_MATTER.sub("", path.read_text()).lower()))
    return counts


def distinct_stream(counts: Counter[str], n: int, seed: int = 7) -> list[str]:
    """n queries of one or two words, drawn by the corpus's own word frequencies."""
    rng = random.Random(seed)
    words, weights = zip(*counts.items(), strict=True)
    return [" ".join(rng.choices(words, weights, k=rng.choice((1, 2)))) for _ in range(n)]


def fts_copy(index_url: str, target: Path) -> int:
    """The same pages' titles and bodies in an SQLite FTS5 table (what Datasette serves), from either backend."""
    from sqlalchemy import create_engine, text

    src = create_engine(index_url)
    dst = sqlite3.connect(target)
    dst.execute("CREATE VIRTUAL TABLE fts USING fts5(id UNINDEXED, title, body)")
    count = 0
    with src.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=5000).execute(text("SELECT id, title, body FROM page"))
        for part in result.partitions():
            dst.executemany("INSERT INTO fts (id, title, body) VALUES (?, ?, ?)", [tuple(r) for r in part])
            count += len(part)
    src.dispose()
    dst.commit()
    dst.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    dst.commit()
    dst.close()
    return count


def fts5_expression(query: str) -> str:
    """Every word quoted: an AND of words that FTS5 cannot read as syntax."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in query.split())


def wait_until(url: str, seconds: float, proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering {url}")
        try:
            r = httpx.get(url, timeout=5)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no answer from {url} within {seconds} s")


def stop(proc: subprocess.Popen, port: int | None = None) -> None:  # type: ignore[type-arg]
    """Stop a server and its workers, then wait until its port is free (a worker still holding the socket made the
    next server's start fail with uvicorn's exit 3 on the loaded machine)."""
    workers = descendants(proc.pid)  # the zygote and its workers (uvicorn's workers, for a --baseline before it)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 15
    for pid in workers:  # this server's own workers, by pid
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while port is not None and time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.2)


def wrk(base: str, paths_file: Path, script: Path, conns: int, seconds: float) -> dict[str, float]:
    """One wrk run; returns req/s, p50/p99 in ms and the error count."""
    cmd = [
        "wrk",
        "-t",
        "2",
        "-c",
        str(conns),
        "-d",
        f"{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        base,
        "--",
        str(paths_file),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("WRK "))
    data = json.loads(line[4:])
    seconds_run = data["duration_us"] / 1e6
    return {
        "rps": round(data["requests"] / seconds_run, 1),
        "p50_ms": round(data["p50_us"] / 1000, 2),
        "p99_ms": round(data["p99_us"] / 1000, 2),
        "errors": data["socket_errors"] + data["status_errors"] + data["timeouts"],
        "requests": data["requests"],
    }


def drive(
    name: str, base: str, files: dict[str, Path], script: Path, seconds: float, runs: list[tuple[str, int]]
) -> dict[str, dict[str, float]]:
    wrk(base, files["hot"], script, 8, 2)  # warm-up
    results = {}
    for workload, conns in runs:
        results[f"{workload}/{conns}"] = r = wrk(base, files[workload], script, conns, seconds)
        print(
            f"{name:22} {workload:9} {conns:3} conns: {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:8.2f} ms  errors {r['errors']}",
            flush=True,
        )
    return results


def memory(proc: subprocess.Popen, base: str, queries: list[str]) -> dict[str, dict[str, float]]:  # type: ignore[type-arg]
    """Resident memory of the serving process and of each worker, after `queries` searched (pages of the index touched).

    Each query is asked on a connection of its own, so the kernel spreads them over the workers.
    """
    for q in queries:
        httpx.get(f"{base}/api/search", params={"q": q, "limit": 10}, timeout=30)
    return resident_memory(proc)


def resident_memory(proc: subprocess.Popen) -> dict[str, dict[str, float]]:  # type: ignore[type-arg]
    """Resident memory of the serving process, of the zygote its workers were forked from (none for a --baseline of
    uvicorn's spawned workers) and of each of its workers, now."""
    found = {"base": memory_mb(proc.pid)}
    workers = []
    for pid in children(proc.pid):
        if "resource_tracker" in Path(f"/proc/{pid}/cmdline").read_text():
            continue
        if below := children(pid):  # the zygote (app/serve_workers.py)
            found["zygote"] = memory_mb(pid)
            workers += below
        else:
            workers.append(pid)
    for n, pid in enumerate(workers):
        found[f"worker {n + 1}"] = memory_mb(pid)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each wrk run")
    parser.add_argument("--queries", type=int, default=DISTINCT, help="length of the distinct-query stream")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--snippet-every", type=int, default=0, help="give every N-th page a compiled CUDA block")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="index into a fresh database on this PostgreSQL server")
    parser.add_argument(
        "--db", metavar="URL", help="index into this database (made beforehand, kept after) instead of a fresh one"
    )
    parser.add_argument("--wiki", type=Path, help="the generated wiki's folder, kept (generated there when it holds no page)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--workers", default="1", help="comma-separated `serve --workers` counts for the uncached rows (e.g. 1,2)"
    )
    parser.add_argument(
        "--memory-only",
        action="store_true",
        help="only the memory of `serve --workers N` (each count of --workers) after 2,000 distinct queries; no wrk, no Datasette",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also serve the same index with the code of this checkout (PYTHONPATH; e.g. `git worktree add` of main), "
        "labelled `baseline`, right after kernelwiki's uncached rows and before Datasette: a before/after in one run",
    )
    args = parser.parse_args()
    if not args.memory_only and shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt install wrk)")
    datasette = Path(sys.executable).with_name("datasette")
    if not args.memory_only and not datasette.exists():
        sys.exit("Datasette is not installed in this environment: pip install 'datasette>=0.64,<1' (or the [bench] extra)")

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root, evidence = args.wiki or tmp / "wiki", tmp / "evidence"
        evidence.mkdir()
        if args.wiki is None or not any(root.glob("*/*/*.md")):
            started = time.perf_counter()
            generate(root, args.pages, snippet_every=args.snippet_every)
            print(f"{args.pages} pages generated in {time.perf_counter() - started:.1f} s", flush=True)
        if args.db:
            url, drop = args.db, lambda: None
        else:
            url, drop = postgres_database(args.postgres) if args.postgres else (f"sqlite:///{tmp / 'index.db'}", lambda: None)
        try:
            run(args, tmp, root, evidence, url, datasette)
        finally:
            drop()


def run(args: argparse.Namespace, tmp: Path, root: Path, evidence: Path, url: str, datasette: Path) -> None:
    """Index, then serve and drive each server in turn (see the module's docstring)."""
    env = {
        **os.environ,
        "KERNELWIKI_WIKI": str(root),
        "KERNELWIKI_DB": url,
        "KERNELWIKI_EVIDENCE": str(evidence),
        "KERNELWIKI_SEARCH_DIR": str(tmp / "search"),
    }
    started, cpu = time.perf_counter(), os.times()
    indexed = subprocess.run([str(KW_BIN), "index"], env=env, check=False, timeout=3600, capture_output=True, text=True)
    if indexed.returncode != 0:
        sys.exit(f"`kernelwiki index` failed with status {indexed.returncode}:\n{indexed.stderr[-4000:]}")
    index_s = time.perf_counter() - started
    spent = os.times()
    index_cpu_s = spent.children_user + spent.children_system - cpu.children_user - cpu.children_system
    print(indexed.stdout.strip().splitlines()[-1], flush=True)
    print(
        f"`kernelwiki index`: {index_s:.1f} s wall, {index_cpu_s:.1f} s CPU in its own process (its parsing workers not counted)",
        flush=True,
    )
    pages = fts_copy(url, tmp / "fts.db")
    stream = distinct_stream(corpus_words(root), args.queries)
    script = tmp / "stream.lua"
    script.write_text(WRK_SCRIPT)

    def paths(name: str, queries: list[str], kind: str) -> Path:
        path = tmp / f"{kind}-{name}.txt"
        if kind == "kw":
            lines = [f"/api/search?limit=10&q={quote(q)}" for q in queries]
        else:
            lines = [f"/fts/search.json?_shape=array&q={quote(fts5_expression(q))}" for q in queries]
        path.write_text("\n".join(lines) + "\n")
        return path

    kw_files = {"hot": paths("hot", HOT, "kw"), "distinct": paths("distinct", stream, "kw")}
    ds_files = {"hot": paths("hot", HOT, "ds"), "distinct": paths("distinct", stream, "ds")}
    runs = [("hot", 8), ("distinct", 8), ("hot", 64), ("distinct", 64)]
    base = f"http://127.0.0.1:{args.port}"
    figures: dict[str, dict[str, dict[str, float]]] = {}
    print(
        f"{pages} pages indexed by `kernelwiki index` in {index_s:.1f} s; {len(set(stream))} distinct of {len(stream)} stream queries",
        flush=True,
    )

    counts = [int(w) for w in args.workers.split(",")]
    servers = [("kernelwiki" if w == 1 else f"kernelwiki x{w} workers", "0", w, "") for w in counts]
    if args.baseline is not None:
        servers += [(f"baseline x{w} workers", "0", w, str(args.baseline.resolve())) for w in counts]
    for label, cache, workers, code in servers if args.memory_only else [*servers, ("kernelwiki cached", "1024", 1, "")]:
        proc = subprocess.Popen(
            [str(KW_BIN), "serve", "--port", str(args.port), "--workers", str(workers)],
            env={
                **env,
                "KERNELWIKI_SEARCH_CACHE_SIZE": cache,
                "KERNELWIKI_ACCESS_LOG": "false",
                **({"PYTHONPATH": code} if code else {}),
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            started = time.perf_counter()
            wait_until(base + "/api/search?q=warp", 1800, proc)
            first = time.perf_counter() - started
            idle = wait_idle(proc.pid, 900)
            print(f"{label}: first search answered {first:.1f} s after start, idle {idle:.1f} s later", flush=True)
            if args.memory_only:
                used = memory(proc, base, stream[:2000])
                for name, m in used.items():
                    print(
                        f"{label:22} {name:9} rss {m['rss_mb']:7.1f} MB  pss {m['pss_mb']:7.1f} MB  private {m['private_mb']:7.1f} MB"
                        f"  anon {m['anon_mb']:7.1f} MB"
                    )
                figures[label] = {"memory": used}  # type: ignore[dict-item]
                continue
            figures[label] = drive(
                label, base, kw_files, script, args.seconds, runs if cache == "0" else [("hot", 8), ("hot", 64)]
            )
            resident = resident_memory(proc)
            for name, m in resident.items():
                print(
                    f"{label:22} {name:9} rss {m['rss_mb']:7.1f} MB  pss {m['pss_mb']:7.1f} MB  private {m['private_mb']:7.1f} MB"
                    f"  anon {m['anon_mb']:7.1f} MB"
                )
            figures[label]["memory"] = resident  # type: ignore[assignment]
        finally:
            stop(proc, args.port)
        if label == servers[-1][0]:  # Datasette between kernelwiki's runs, in the same run
            (tmp / "metadata.json").write_text(
                json.dumps(
                    {
                        "databases": {
                            "fts": {
                                "queries": {
                                    "search": {
                                        "sql": "select id, title, snippet(fts, 2, '<mark>', '</mark>', '…', 24) as excerpt "
                                        "from fts where fts match :q order by bm25(fts) limit 10"
                                    }
                                }
                            }
                        }
                    }
                )
            )
            proc = subprocess.Popen(
                [
                    str(datasette),
                    "serve",
                    str(tmp / "fts.db"),
                    "-m",
                    str(tmp / "metadata.json"),
                    "-p",
                    str(args.port),
                    "--setting",
                    "sql_time_limit_ms",
                    "10000",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_until(base + "/fts/search.json?_shape=array&q=%22warp%22", 120, proc)
                wait_idle(proc.pid)
                figures["datasette"] = drive("datasette (FTS5 bm25)", base, ds_files, script, args.seconds, runs)
            finally:
                stop(proc, args.port)

    if args.memory_only:
        if args.json:
            args.json.write_text(json.dumps({"pages": args.pages, "index_s": round(index_s, 1), "figures": figures}, indent=2))
        return
    print(
        "\n| server | workload | conns | kernelwiki req/s | p50 ms | p99 ms | errors | Datasette req/s | p50 ms | p99 ms | errors | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, *_ in [*servers, ("kernelwiki cached", "", 1, "")]:
        for key, k in figures[label].items():
            if key == "memory":
                continue
            d = figures["datasette"][key]
            workload, conns = key.split("/")
            ratio = k["rps"] / d["rps"] if d["rps"] else float("inf")
            print(
                f"| {label} | {workload} | {conns} | {k['rps']} | {k['p50_ms']} | {k['p99_ms']} | {k['errors']} | {d['rps']} | {d['p50_ms']} | {d['p99_ms']} | {d['errors']} | {ratio:.2f}× |"
            )
    result = {"pages": args.pages, "index_s": round(index_s, 1), "seconds": args.seconds, "figures": figures}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
