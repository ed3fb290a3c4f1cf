"""A KernelWiki-layout repository at the public one's size: index, lint, search, the queries/ views and claims.

    .venv/bin/python bench/bench_repository.py --prs 2700

Writes a synthetic repository in the KernelWiki layout (data/schemas.yaml,
data/tags.yaml, data/aliases.yaml; sources/prs/<repo>/PR-N.md generated PR
records like the public repository's ~2,700; a few dozen wiki pages of each
type with performance_claims) and measures, in this process: the full index
(`Store.reindex`, SQL and full-text), one changed PR page reindexed,
`kernelwiki lint`'s reading and schema checks (app.index.pages.load_wiki), search
over the store, every queries/ view (app.index.repository_queries.view_data) and the
claims listing. The pages are synthetic: their text is generated, not copied.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

REPOS = [
    "NVIDIA/cutlass",
    "flashinfer-ai/flashinfer",
    "NVIDIA/TensorRT-LLM",
    "deepseek-ai/DeepGEMM",
    "vllm-project/vllm",
    "sgl-project/sglang",
]
TECHNIQUES = ["warp-specialization", "persistent-kernel", "swizzling", "pipeline-stages", "kernel-fusion", "tile-scheduling"]
FEATURES = ["tcgen05", "tmem", "tma", "clc", "wgmma", "mbarrier", "nvfp4", "fp8"]
KERNELS = ["gemm", "attention", "moe", "grouped-gemm", "mla", "decode", "prefill", "quantization"]
LANGS = ["cuda-cpp", "cute-dsl", "triton", "python", "ptx"]
ARCHS = ["sm90", "sm90a", "sm100", "sm100a", "sm120"]
WORDS = (
    "kernel tile warp pipeline stage barrier tensor memory shared global cluster epilogue scheduler persistent "
    "fused gemm attention softmax decode prefill layout swizzle descriptor accumulator register occupancy latency"
).split()
QUERIES = ["tcgen05", "warp specialization", "grouped gemm moe", "TMEM", "flash attention decode", "cutlass"]
WIKI_TYPES = ["hardware", "technique", "pattern", "kernel", "language", "migration"]
PREFIX = {
    "hardware": "hw",
    "technique": "technique",
    "pattern": "pattern",
    "kernel": "kernel",
    "language": "lang",
    "migration": "migration",
}

SCHEMAS = """source-pr:
  required: [id, repo, pr, title, author, date, url, source_category, architectures, tags, techniques, hardware_features, kernel_types, languages, captured_at, status]
  optional: [merge_sha, inclusion_reason, changed_paths]
  constraints:
    source_category: upstream-code
    status: [open, merged, closed]
    merge_sha_required_when: "status == merged"
"""


def _list(xs: list[str]) -> str:
    return "[" + ", ".join(xs) + "]"


def generate(root: Path, prs: int, wiki_per_type: int = 10, seed: int = 1) -> None:
    """Write the repository: data files, `prs` PR pages spread over REPOS, `wiki_per_type` pages of each wiki type."""
    rng = random.Random(seed)
    (root / "data").mkdir(parents=True)
    types = "\n".join(
        f"wiki-{t}:\n  required: [id, title, type, tags, sources]\n  optional: [architectures, performance_claims, reproducibility, "
        f"kernel_types, languages, techniques, hardware_features, symptoms, candidate_techniques, related, confidence]\n"
        f"  constraints:\n    type: {t}\n    id_prefix: {PREFIX[t]}-\n"
        for t in WIKI_TYPES
    )
    (root / "data" / "schemas.yaml").write_text(SCHEMAS + "\n" + types)
    (root / "data" / "tags.yaml").write_text(
        f"architectures: {_list(ARCHS)}\nhardware_features: {_list(FEATURES)}\ntechniques: {_list(TECHNIQUES)}\n"
        f"kernel_types: {_list(KERNELS)}\nlanguages: {_list(LANGS)}\n"
        "reproducibility: [concept, pseudocode, snippet, runnable, benchmarked]\n"
    )
    (root / "data" / "aliases.yaml").write_text("tcgen05: [UMMA]\ntmem: [TMEM, tensor memory]\nsm90: [H100, H200]\n")
    for i in range(prs):
        repo = REPOS[i % len(REPOS)]
        folder = root / "sources" / "prs" / repo.split("/")[1]
        folder.mkdir(parents=True, exist_ok=True)
        n = 1000 + i
        status = rng.choice(["merged", "merged", "merged", "open", "closed"])
        title = " ".join(rng.sample(WORDS, 6)).capitalize()
        body = "\n".join(" ".join(rng.choices(WORDS, k=14)) + "." for _ in range(6))
        (folder / f"PR-{n}.md").write_text(
            f"---\nid: pr-{repo.split('/')[1]}-{n}\nrepo: {repo}\npr: {n}\ntitle: '{title}'\nauthor: dev{i % 97}\n"
            f"date: '2026-0{1 + i % 9}-1{i % 9}'\nurl: https://example.invalid/{repo}/pull/{n}\nsource_category: upstream-code\n"
            f"architectures: {_list(rng.sample(ARCHS, 2))}\ntags: {_list(rng.sample(KERNELS, 2))}\n"
            f"techniques: {_list(rng.sample(TECHNIQUES, rng.randint(0, 2)))}\nhardware_features: {_list(rng.sample(FEATURES, rng.randint(0, 3)))}\n"
            f"kernel_types: {_list(rng.sample(KERNELS, 2))}\nlanguages: {_list(rng.sample(LANGS, 1))}\ncaptured_at: '2026-05-20'\n"
            f"status: {status}\n"
            + (f"merge_sha: {rng.getrandbits(32):08x}\n" if status == "merged" else "")
            + "changed_paths:\n- include/kernel.cuh\n---\n\n## Upstream description excerpt\n\n"
            + body
            + "\n"
        )
    for t in WIKI_TYPES:
        folder = root / "wiki" / (t + "s")
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(wiki_per_type):
            pid = f"{PREFIX[t]}-synthetic-{k}"
            claims = (
                "performance_claims:\n"
                + "".join(
                    f"  - {{gpu: {rng.choice(['B200', 'H200', 'H100'])}, dtype: bf16, metric: TFLOPS, value: {rng.randint(300, 1600)}, "
                    f"source_id: pr-cutlass-{1000 + 6 * k}}}\n"
                    for _ in range(2)
                )
                if t == "kernel"
                else ""
            )
            extra = (
                f"symptoms: {_list(rng.sample(['memory-bound', 'tail-effect', 'register-pressure'], 2))}\ncandidate_techniques: [technique-synthetic-{k}]\n"
                if t == "pattern"
                else ""
            )
            body = "\n\n".join(
                f"## {w.capitalize()}\n\n" + " ".join(rng.choices(WORDS, k=80)) + "." for w in rng.sample(WORDS, 5)
            )
            (folder / f"synthetic-{k}.md").write_text(
                f"---\nid: {pid}\ntitle: {t.capitalize()} synthetic {k}\ntype: {t}\ntags: [{rng.choice(KERNELS)}]\n"
                f"architectures: [sm100a]\nreproducibility: concept\nkernel_types: [{rng.choice(KERNELS)}]\n"
                f"techniques: [{rng.choice(TECHNIQUES)}]\nsources: [pr-cutlass-{1000 + 6 * k}]\n{claims}{extra}---\n\n{body}\n"
            )


def _time(fn: object, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prs", type=int, default=2700)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    from app.index.filters import Filters
    from app.index.pages import load_wiki
    from app.index.perf import ClaimFilters, list_claims
    from app.index.repository_queries import VIEWS, view_data
    from app.main import open_store
    from app.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        generate(root, args.prs)
        files = sum(1 for _ in root.rglob("*.md"))
        settings = Settings(wiki=root, db=f"sqlite:///{tmp}/index.db", evidence=Path(tmp) / "none", search_cache_size=0)
        store = open_store(settings)
        t0 = time.perf_counter()
        report = store.reindex(root)
        full = time.perf_counter() - t0
        page = next((root / "sources" / "prs" / "cutlass").glob("*.md"))
        page.write_text(page.read_text() + "\nOne more line.\n")
        t0 = time.perf_counter()
        store.reindex(root)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        wiki = load_wiki(root)
        lint = time.perf_counter() - t0
        errors = sum(1 for d in wiki.diagnostics if d.severity == "error")
        print(f"{files} files, {len(report.added)} pages indexed, {len(report.failed)} failed; lint: {errors} errors")
        print(f"| full index (SQL + full text) | {full:.2f} s |")
        print(f"| one changed PR page reindexed | {one * 1000:.0f} ms |")
        print(f"| lint: read + schema checks (load_wiki) | {lint:.2f} s |")
        for q in QUERIES:
            p50, p99 = _time(lambda q=q: store.searcher.search(q, Filters(), limit=20), args.rounds)
            print(f"| search '{q}' p50 / p99 | {p50:.1f} / {p99:.1f} ms |")
        with store.engine.connect() as conn:
            for name in VIEWS:
                p50, p99 = _time(lambda name=name: view_data(conn, name), args.rounds)
                print(f"| view {name} p50 / p99 | {p50:.1f} / {p99:.1f} ms |")
            p50, p99 = _time(lambda: list_claims(conn, ClaimFilters(gpu="B200")), args.rounds)
            print(f"| claims gpu=B200 p50 / p99 | {p50:.1f} / {p99:.1f} ms |")
        store.engine.dispose()


if __name__ == "__main__":
    main()
