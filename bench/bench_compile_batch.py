"""CPU cost of compiling the bundled wiki's cuda blocks one target at a time versus in one nvcc run per block.

    .venv/bin/python bench/bench_compile_batch.py [--wiki wiki] [--limit N]

For every cuda block that compiles for two or more targets (`compile` and `run`
blocks; `compile_fail` blocks are always built per target), the nvcc commands of
runner/compile.py are run directly, one after the other, twice:

* per target (the baseline): the `-rdc=true -c` build per target, plus for `run`
  blocks the whole-program build per target;
* shared (runner/batch.py, what `verify --compile-only` does): one `-rdc=true -c`
  build with every target's `-gencode`, plus one whole-program build likewise.

The figure is CPU seconds (user + system of nvcc and everything it starts, from
`getrusage`), which a busy machine inflates far less than wall-clock time; the
ratio shared / per target is what batching saves. No sandbox, no cache.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.batch import batchable  # noqa: E402
from runner.compile import BASE_NVCC_FLAGS, EXECUTABLE, PROGRAM_NVCC_FLAGS, gencode, snippet_nvcc_flags  # noqa: E402
from runner.toolchain import discover_toolchain  # noqa: E402
from runner.verify import load_snippets  # noqa: E402
from snippets.build import build_translation_unit  # noqa: E402

NVCC_TIMEOUT_S = 300


def cpu_seconds(argv: list[str], cwd: Path) -> float:
    """User + system CPU seconds of `argv` and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, capture_output=True, timeout=NVCC_TIMEOUT_S, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(nvcc: str, snippet, targets: list[str], shared: bool) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The nvcc commands runner/compile.py runs for these targets, per target or shared."""
    rdc_flags = snippet_nvcc_flags(snippet, compile_only=snippet.mode != "run")
    program_flags = snippet_nvcc_flags(snippet, compile_only=False)
    groups = [targets] if shared else [[t] for t in targets]
    out = []
    for group in groups:
        codes = [gencode(t) for t in group]
        out.append([nvcc, *codes, *BASE_NVCC_FLAGS, *rdc_flags, "snippet.cu", "-c", "-o", "snippet.o"])
        if snippet.mode == "run":
            keep = ["-keep", "-keep-dir", "keep-program"] if shared else []
            out.append([nvcc, *codes, *PROGRAM_NVCC_FLAGS, *keep, *program_flags, "snippet.cu", "-o", EXECUTABLE])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default=str(REPO / "wiki"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N eligible blocks (0: all)")
    args = parser.parse_args()
    nvcc = discover_toolchain().nvcc
    if not nvcc:
        sys.exit("nvcc not found")
    snippets, _ = load_snippets(args.wiki)
    eligible = [s for s in snippets if batchable(s, list(s.targets))]
    if args.limit:
        eligible = eligible[: args.limit]
    totals = {"per_target": [0.0, 0], "shared": [0.0, 0]}
    started = time.monotonic()
    for snippet in eligible:
        tu = build_translation_unit(snippet)
        for label, shared in (("per_target", False), ("shared", True)):
            work = Path(tempfile.mkdtemp(prefix="kw-bench-batch-"))
            try:
                (work / tu.filename).write_text(tu.text, encoding="utf-8")
                for folder in ("keep", "keep-program"):
                    (work / folder).mkdir()
                for argv in commands(nvcc, snippet, list(snippet.targets), shared):
                    totals[label][0] += cpu_seconds(argv, work)
                    totals[label][1] += 1
            finally:
                shutil.rmtree(work, ignore_errors=True)
    pairs = sum(len(s.targets) for s in eligible)
    per, shared_ = totals["per_target"], totals["shared"]
    print(
        json.dumps(
            {
                "blocks": len(eligible),
                "block_target_pairs": pairs,
                "per_target": {"nvcc_runs": per[1], "cpu_s": round(per[0], 1)},
                "shared": {"nvcc_runs": shared_[1], "cpu_s": round(shared_[0], 1)},
                "ratio_shared_over_per_target": round(shared_[0] / per[0], 3) if per[0] else None,
                "wall_s": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
