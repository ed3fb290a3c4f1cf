"""CPU seconds of `kernelwiki` commands started afresh, as tests and scripts start them (issue t27speed).

    .venv/bin/python bench/bench_cli_start.py [--rounds 5] [--base /tmp/kw_base]

Each round runs `kernelwiki --help`, `kernelwiki lint` and `kernelwiki index` (a fresh SQLite index) of
tests/fixtures/wiki in new processes (`python -m app.cli.main`, run from an empty folder) and reads their
CPU time (user + system, `getrusage` of the children): CPU, not wall, so that a shared machine's load moves it
little. `--base` names a tree of another commit (`git archive COMMIT app runner snippets | tar -x -C DIR`),
run interleaved with this one under PYTHONPATH; medians of each are printed, with their ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WIKI = REPO / "tests" / "fixtures" / "wiki"
TIMEOUT_S = 120


def commands(folder: Path) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "lint": ["lint", "--wiki", str(WIKI)],
        "index": ["index", "--wiki", str(WIKI), "--db", f"sqlite:///{folder / 'index.db'}"],
    }


def cpu_of(tree: Path, argv: list[str], folder: Path) -> float:
    """CPU seconds of one `kernelwiki ARGV` run with `tree` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(tree), "KERNELWIKI_EVIDENCE": str(folder / "evidence")}
    subprocess.run(
        [sys.executable, "-m", "app.cli.main", *argv], cwd=folder, env=env, capture_output=True, timeout=TIMEOUT_S, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", type=Path, help="a tree of another commit, run interleaved with this one")
    args = parser.parse_args()
    trees = {"this": REPO, **({"base": args.base.resolve()} if args.base else {})}
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            folder = Path(tempfile.mkdtemp(prefix="kw-cli-start-"))
            try:
                for name, argv in commands(folder).items():
                    seconds.setdefault((name, label), []).append(cpu_of(tree, argv, folder))
            finally:
                shutil.rmtree(folder)
    for name in commands(Path()):
        this = statistics.median(seconds[(name, "this")])
        line = f"{name:8s} this {this:.3f} s"
        if args.base:
            base = statistics.median(seconds[(name, "base")])
            line += f"  base {base:.3f} s  ratio {this / base:.2f}"
        print(line + f"  (CPU, median of {args.rounds})")


if __name__ == "__main__":
    main()
