"""Verification benchmark (issue: snippet runner).

    .venv/bin/python bench/bench_verify.py [--wiki wiki] [--jobs 2]

Reports a cold `--compile-only` verification of the whole wiki (every snippet ×
target, empty cache), the same again warm (nothing changed: cache hits only),
and, as the baseline, the same translation units compiled one at a time with a
plain `nvcc -c` call per snippet × target. The ratio cold / baseline is what the
runner's extra work (the -rdc build, the whole-program link of programs, PTX
and SASS checks, isolation) costs over the cheapest possible compile.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PLAIN_NVCC_TIMEOUT_S = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default=str(REPO / "wiki"))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    from runner.compile import gencode
    from runner.toolchain import discover_toolchain
    from runner.verify import load_snippets, verify
    from snippets.build import build_translation_unit

    toolchain = discover_toolchain()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        started = time.perf_counter()
        cold = verify(args.wiki, jobs=args.jobs, compile_only=True, cache_dir=cache)
        cold_s = time.perf_counter() - started
        started = time.perf_counter()
        warm = verify(args.wiki, jobs=args.jobs, compile_only=True, cache_dir=cache)
        warm_s = time.perf_counter() - started

        snippets, _ = load_snippets(args.wiki)
        units = [(s, t) for s in snippets if s.lang == "cuda" and s.mode not in ("sketch", "error") for t in s.targets]
        work = Path(tmp) / "plain"
        work.mkdir()
        started = time.perf_counter()
        for i, (snippet, target) in enumerate(units):
            source = work / f"u{i}.cu"
            source.write_text(build_translation_unit(snippet).text)
            subprocess.run(
                [toolchain.nvcc, gencode(target), "-c", "-o", str(work / f"u{i}.o"), str(source)],
                cwd=work,
                capture_output=True,
                timeout=PLAIN_NVCC_TIMEOUT_S,
                check=False,
            )
        plain_s = time.perf_counter() - started
        plain_cuda = len(units)
    cuda_pairs = sum(1 for s in snippets if s.lang == "cuda" and s.mode not in ("sketch", "error") for _ in s.targets)
    print(
        json.dumps(
            {
                "snippet_target_pairs": sum(len(s.targets) or 1 for s in snippets),
                "records": len(cold.records),
                "cold_s": round(cold_s, 1),
                "warm_s": round(warm_s, 3),
                "warm_builds": warm.builds,
                "plain_nvcc_one_at_a_time_s": round(plain_s, 1),
                "plain_nvcc_units": plain_cuda,
                "runner_cuda_units": cuda_pairs,
                "cold_ratio_to_plain": round(cold_s / plain_s, 2),
                "jobs": args.jobs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
