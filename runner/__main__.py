"""`python3 -m runner verify …`: verify a wiki's snippets on this machine and write evidence JSONL.

Needs only the standard library, markdown-it-py and PyYAML (rich, when
installed, draws a progress bar and the summary table).

    python3 -m runner verify --wiki wiki --report evidence/h200.jsonl [--page ID …]
        [--target sm_90a …] [--jobs N] [--no-cache] [--compile-only] [--cache-dir DIR]
        [--isolation bwrap|unshare-net|none|auto]   # default bwrap (docs/sandbox.md)
    python3 -m runner doctor          # tools, GPUs and isolation found here
    python3 -m runner snippets --wiki wiki [--page ID …]   # extracted snippets as JSON lines
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from runner.cache import DEFAULT_CACHE_DIR
from runner.report import print_summary, progress_bar
from runner.sandbox import SandboxUnavailable
from runner.settings import ISOLATION_BWRAP, ISOLATION_UNSHARE
from runner.verify import load_snippets, verify
from runner.verify_options import add_verify_options


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m runner", description="kernelwiki snippet runner")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="compile, check and run the wiki's snippets")
    v.add_argument("--wiki", default="wiki", help="folder of pages (default: wiki)")
    add_verify_options(v)  # the options `kernelwiki verify` shares (runner/verify_options.py)
    v.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR), help=f"result cache (default {DEFAULT_CACHE_DIR})")
    v.add_argument("--nvcc", help="nvcc to use (default: KERNELWIKI_NVCC, then PATH)")
    v.add_argument("--json", action="store_true", help="print the whole report as JSON instead of a table")
    d = sub.add_parser("doctor", help="show the tools, GPUs and isolation found on this machine")
    d.add_argument("--nvcc")
    s = sub.add_parser("snippets", help="print the extracted snippets as JSON lines")
    s.add_argument("--wiki", default="wiki")
    s.add_argument("--page", action="append", default=[], metavar="ID")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "doctor":
        from runner.cgroup import cgroup_parent
        from runner.gpus import discover_gpus
        from runner.sandbox import isolation_problem, runner_settings
        from runner.toolchain import discover_toolchain

        settings = runner_settings()
        levels = {level: isolation_problem(level) or "works" for level in (ISOLATION_BWRAP, ISOLATION_UNSHARE)}
        parent, problem = cgroup_parent(settings.cgroup_root)
        cgroup = f"works: each command gets a cgroup below {parent}" if parent else f"not usable: {problem}"
        print(
            json.dumps(
                {
                    "toolchain": discover_toolchain(args.nvcc).to_dict(),
                    "gpus": [g.to_dict() for g in discover_gpus()],
                    "isolation": {"setting": settings.isolation, **levels},
                    "limits": {"cgroup setting": settings.cgroup, "cgroup v2": cgroup, "run memory": settings.run_memory_bytes},
                },
                indent=2,
            )
        )
        return 0
    if args.command == "snippets":
        snippets, problems = load_snippets(Path(args.wiki), args.page or None)
        for s in snippets:
            print(json.dumps(s.to_dict()))
        for p in problems:
            print(str(p), file=sys.stderr)
        return 1 if any(p.severity == "error" for p in problems) else 0
    bar, update = progress_bar()
    if bar is not None:
        bar.start()
    try:
        report = verify(
            Path(args.wiki),
            pages=args.page or None,
            targets=args.target or None,
            jobs=args.jobs,
            use_cache=not args.no_cache,
            compile_only=args.compile_only,
            progress=update,
            cache_dir=Path(args.cache_dir),
            nvcc=args.nvcc,
            isolation=args.isolation,
        )
    except (SandboxUnavailable, ValueError) as exc:
        print(f"kernelwiki runner: nothing was run: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.stop()
    if args.report:
        report.write_jsonl(args.report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_summary(report)
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
