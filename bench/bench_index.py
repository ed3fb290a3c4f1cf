"""Index and search benchmark on a synthetic wiki (issue: service core).

    .venv/bin/python bench/bench_index.py --pages 10000
    .venv/bin/python bench/bench_index.py --cli --pages 10000 --snippet-every 2          # `kernelwiki index`, SQLite
    .venv/bin/python bench/bench_index.py --cli --pages 100000 --snippet-every 2 \
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres                  # the same into PostgreSQL

`--cli` times `kernelwiki index` as a user runs it (a process of its own, wall time, start-up
included; and the CPU time of it and its parsing workers, which a loaded machine inflates less)
on a fresh index, then again with one page changed and with nothing changed, and stops there. `--postgres ADMIN_URL` makes a database of its own on that server for the run (and drops it).

Reports full index time, one changed page reindexed, search latency over HTTP
(p50/p99, one client, a fixed query mix) and requests per second with 8
concurrent connections. Each figure comes with a baseline measured the same
way (reading and hashing every file; `GET /api/health` over the same HTTP
stack) so the ratio stays meaningful on a noisy machine.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.proc import run_with_cpu, wait_idle  # noqa: E402

GPU_WORDS = (
    "warp warpgroup tensor memory shared global cluster barrier mbarrier pipeline stage swizzle bank "
    "register occupancy latency throughput bandwidth tile fragment accumulator descriptor layout async "
    "copy load store fence proxy transaction phase parity producer consumer scheduler persistent split"
).split()
IDENTS = [
    "cp.async.bulk.tensor.2d",
    "wgmma.mma_async.sync.aligned.m64n128k16",
    "tcgen05.mma.cta_group::1",
    "mbarrier.try_wait.parity",
    "__syncthreads",
    "shared::cluster",
    "expect_tx",
    "m16n8k16",
    "ldmatrix.sync.aligned",
]
SYLLABLES = "ka lo mi ne su ta ri po de gu fa ve zo bi ru cha shi ten mor lan qui dex vor pal".split()


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    """Pseudo-words, so a synthetic wiki has a real-sized vocabulary rather than forty words."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


QUERIES = [
    "cp.async.bulk",
    "tensor memory",
    "wgmma.mma_async",
    "TMEM",
    "swizzle bank",
    "mbarrier phase",
    "__syncthreads",
    "shared::cluster",
    "tensr memroy",
    "persistent scheduler",
]
ARCHS = ["sm80", "sm90", "sm90a", "sm100a"]
WEB_PATHS = [
    "/",
    "/evidence",
    "/api/snippets?limit=20",
    "/api/pages",
    "/api/pages?offset=9000",
    "/graph",
    "/graph?page=page-42",
    "/api/graph",
    "/api/graph?page=page-42",
]
"""Listing and graph views whose cost must not grow with the wiki (issue 9: each under 100 ms, graphs under 1 s)."""
TYPES = ["hardware", "technique", "pattern", "api"]


SNIPPET = "\n## Kernel\n\n```cuda\n__global__ void k{i}(float* out) {{ out[threadIdx.x] = {i}.0f; }}\n```\n"
"""The compiled CUDA block `--snippet-every` adds (targets: the page's architectures)."""


def generate(root: Path, n: int, seed: int = 1, snippet_every: int = 0) -> None:
    """Write n synthetic pages of about 3 kB each in 6 sections, each linking to the next page.

    Words follow a Zipf-like law over a 5,000-word vocabulary; each page also
    carries a few GPU words and two GPU identifiers, so queries match a
    realistic fraction of the pages rather than all of them. With `snippet_every`,
    every that-many-th page also ends with a compiled CUDA block for sm_90a.
    """
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    # Cumulative weights once: `choices(vocab, weights)` would sum all 5,000 again for every section (600,000
    # times at 100,000 pages, most of the generator's time); the draws, and so the pages, are the same.
    cumulative = list(itertools.accumulate(1 / (r + 1) for r in range(len(vocab))))
    for i in range(n):
        folder = root / TYPES[i % 4] / f"{i // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        # A third of the pages name one GPU identifier (each about 4% of the wiki).
        idents = [rng.choice(IDENTS)] * 2 if rng.random() < 0.33 else ["", ""]
        gpu = rng.sample(GPU_WORDS, 6)
        sections = []
        for s in range(6):
            words = rng.choices(vocab, cum_weights=cumulative, k=60)
            words[rng.randrange(60)] = gpu[s]
            text = " ".join(words)
            code = f" `{idents[s % 2]}`" if idents[s % 2] and s < 2 else ""
            sections.append(f"## {rng.choice(vocab).title()} {gpu[s]}\n\n{text}{code}.\n")
        has_code = bool(snippet_every) and i % snippet_every == 0
        arch = rng.choice(ARCHS)  # drawn either way: the pages' words stay those of a run without blocks
        arch = "sm90a" if has_code else arch
        (folder / f"page-{i}.md").write_text(
            f"---\nid: page-{i}\ntitle: {rng.choice(vocab).title()} {rng.choice(GPU_WORDS)} {i}\n"
            f"type: {TYPES[i % 4]}\narchitectures: [{arch}]\ntags: [{rng.choice(GPU_WORDS)}, {rng.choice(vocab)}]\n"
            f"aliases: [alias-{i}]\nrelated: [page-{(i + 1) % n}]\n---\n"
            + "\n".join(sections)
            + (SNIPPET.format(i=i) if has_code else "")
        )


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the index's parsing workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def baseline_read(root: Path) -> float:
    started = time.perf_counter()
    for path in sorted(root.rglob("*.md")):
        hashlib.sha256(path.read_bytes()).hexdigest()
    return time.perf_counter() - started


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def latencies(url: str, paths: list[str], rounds: int) -> list[float]:
    out = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(rounds):
            for path in paths:
                started = time.perf_counter()
                client.get(path).raise_for_status()
                out.append((time.perf_counter() - started) * 1000)
    return out


def throughput(url: str, paths: list[str], clients: int, seconds: float) -> float:
    count = [0] * clients
    stop = time.monotonic() + seconds

    def work(k: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            i = k
            while time.monotonic() < stop:
                client.get(paths[i % len(paths)]).raise_for_status()
                count[k] += 1
                i += 1

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(count) / seconds


def cli_index(root: Path, db: str, evidence: Path) -> dict[str, float]:
    """Wall times of `kernelwiki index` in a process of its own: a fresh index, one page changed, nothing changed."""
    env = {**os.environ, "KERNELWIKI_EVIDENCE": str(evidence)}
    command = [str(Path(sys.executable).parent / "kernelwiki"), "index", "--wiki", str(root), "--db", db]

    server = "postgres" if db.startswith("postgresql") else None

    def run() -> tuple[float, float, float]:
        wall, cpu, server_cpu = run_with_cpu(
            command, 3600, server_user=server, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return round(wall, 2), round(cpu, 2), round(server_cpu, 2)

    full, full_cpu, full_server_cpu = run()
    victim = root / "hardware" / "000" / "page-0.md"
    victim.write_text(victim.read_text() + "\nchanged quokka\n")
    one, one_cpu, _ = run()
    unchanged, unchanged_cpu, _ = run()
    return {
        "cli_full_index_s": full,
        "cli_full_index_cpu_s": full_cpu,  # the CLI and its parsing workers: what other load cannot inflate much
        **({"cli_full_index_server_cpu_s": full_server_cpu} if server else {}),  # the PostgreSQL server's processes
        "cli_one_changed_page_s": one,
        "cli_one_changed_page_cpu_s": one_cpu,
        "cli_unchanged_s": unchanged,
        "cli_unchanged_cpu_s": unchanged_cpu,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }


def postgres_database(admin_url: str) -> tuple[str, Any]:
    """A database of its own on the server of `admin_url` for this run: (its URL, a function that drops it)."""
    from sqlalchemy import create_engine

    name = f"kernelwiki_bench_{os.getpid()}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE DATABASE {name}")

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()

    return admin_url.rsplit("/", 1)[0] + "/" + name, drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20, help="passes over the query mix for latency")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the concurrency run")
    parser.add_argument("--snippet-every", type=int, default=0, help="give every N-th page a compiled CUDA block")
    parser.add_argument("--cli", action="store_true", help="time `kernelwiki index` only (see above)")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="with --cli: index into a fresh database on this server")
    parser.add_argument(
        "--wiki", type=Path, help="with --cli: the generated wiki's folder, kept (generated there when it holds no page)"
    )
    args = parser.parse_args()

    if args.cli:
        with tempfile.TemporaryDirectory() as tmp:
            root = args.wiki or Path(tmp) / "wiki"
            if args.wiki is None or not any(root.glob("*/*/*.md")):
                generate(root, args.pages, snippet_every=args.snippet_every)
            db, drop = postgres_database(args.postgres) if args.postgres else (f"sqlite:///{tmp}/index.db", lambda: None)
            try:
                times = cli_index(root, db, Path(tmp) / "no-evidence")
            finally:
                drop()
        backend = "postgresql" if args.postgres else "sqlite"
        print(json.dumps({"pages": args.pages, "snippet_every": args.snippet_every, "backend": backend, **times}, indent=2))
        return

    from app.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "wiki"
        generate(root, args.pages)
        db = f"sqlite:///{tmp}/index.db"
        read_s = baseline_read(root)
        store = Store(db)
        store.create_schema()
        started = time.perf_counter()
        cpu_before = _cpu_s()
        report = store.reindex(root)  # SQL rows (report.seconds), then the process's full-text index
        full_s = time.perf_counter() - started
        full_cpu_s = _cpu_s() - cpu_before  # this process and its parsing workers: what load cannot inflate
        sql_s = report.seconds
        victim = root / "hardware" / "000" / "page-0.md"
        victim.write_text(victim.read_text() + "\nchanged quokka\n")
        one = store.reindex(root)
        assert one.updated == ["page-0"], one
        unchanged = store.reindex(root)

        port = 8765
        env = {**os.environ, "KERNELWIKI_INDEX_ON_START": "false"}
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "bench.serve_factory:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env={**env, "KERNELWIKI_DB": db, "KERNELWIKI_WIKI": str(root)},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(200):
                try:
                    httpx.get(url + "/api/health", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            search_paths = [f"/api/search?q={q}" for q in QUERIES]
            latencies(url, search_paths, 1)  # warm-up
            wait_idle(server.pid)  # the server's start-up work (full-text index, page warm-up) is over
            base = latencies(url, ["/api/health"], args.rounds * len(QUERIES))
            lat = latencies(url, search_paths, args.rounds)
            rps = throughput(url, search_paths, 8, args.seconds)
            web: dict[str, float] = {}
            for path in WEB_PATHS:  # one client, median of `rounds` requests after one warm-up (caches filled)
                latencies(url, [path], 1)
                web[path] = round(statistics.median(latencies(url, [path], args.rounds)), 2)
            base_rps = throughput(url, ["/api/health"], 8, args.seconds)
        finally:
            server.terminate()
            server.wait(timeout=10)
    result = {
        "pages": args.pages,
        "full_index_s": round(full_s, 2),
        "full_index_sql_part_s": round(sql_s, 2),
        "full_index_cpu_s": round(full_cpu_s, 2),
        "full_index_search_part_s": round(full_s - sql_s, 2),
        "baseline_read_and_hash_s": round(read_s, 3),
        "full_index_ratio_to_read": round(full_s / read_s, 1),
        "one_changed_page_s": round(one.seconds, 3),
        "unchanged_reindex_s": round(unchanged.seconds, 3),
        "search_p50_ms": round(percentile(lat, 50), 2),
        "search_p99_ms": round(percentile(lat, 99), 2),
        "health_p50_ms": round(percentile(base, 50), 2),
        "health_p99_ms": round(percentile(base, 99), 2),
        "search_p50_ratio_to_health": round(statistics.median(lat) / statistics.median(base), 2),
        "web_median_ms": web,
        "search_rps_8_clients": round(rps, 1),
        "health_rps_8_clients": round(base_rps, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
