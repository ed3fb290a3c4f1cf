"""Showing a verification to a person: a progress bar while it runs, a summary table at the end.

rich is used when installed (a live bar on a terminal, a table); plain text otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

from runner.verify import SUMMARY_COLUMNS, ProgressCallback, VerifyReport


def progress_bar() -> tuple[Any, ProgressCallback]:
    """(rich progress bar or None, update callback): call bar.start()/bar.stop() around verify() when not None."""
    if sys.stderr.isatty():
        try:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            bar = Progress(
                TextColumn("verify"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                transient=True,
            )
            task = bar.add_task("", total=None)

            def update(done: int, total: int, snippet_id: str, target: str, status: str) -> None:
                bar.update(task, completed=done, total=total, description=f"{snippet_id} {target} {status}")

            return bar, update
        except ImportError:
            pass

    def plain(done: int, total: int, snippet_id: str, target: str, status: str) -> None:
        if status not in ("pass", "xfail"):
            print(f"[{done}/{total}] {snippet_id} {target}: {status}", file=sys.stderr)

    return None, plain


def print_summary(report: VerifyReport) -> None:
    """Summary table per page and target, then every failure with its message."""
    rows = [(page, target, cell) for page, targets in sorted(report.summary.items()) for target, cell in sorted(targets.items())]
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="kernelwiki verify")
        table.add_column("page", no_wrap=True)
        table.add_column("target")
        for c in SUMMARY_COLUMNS:
            table.add_column(c, justify="right")
        for page, target, cell in rows:
            table.add_row(page, target or "-", *(str(cell[c]) for c in SUMMARY_COLUMNS))
        table.add_row("total", "", *(str(report.totals.get(c, 0)) for c in SUMMARY_COLUMNS), style="bold")
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 140))
        console.print(table)
    except ImportError:
        header = f"{'page':30} {'target':9} " + " ".join(f"{c:>10}" for c in SUMMARY_COLUMNS)
        print(header)
        for page, target, cell in rows:
            print(f"{page:30} {target or '-':9} " + " ".join(f"{cell[c]:>10}" for c in SUMMARY_COLUMNS))
        print(f"{'total':30} {'':9} " + " ".join(f"{report.totals.get(c, 0):>10}" for c in SUMMARY_COLUMNS))
    for problem in report.problems:
        print(str(problem))
    for r in report.records:
        if r.status in ("fail", "timeout", "error"):
            print(f"{r.status.upper()} {r.snippet_id} {r.target} {r.step}: {r.message}")
    print(
        f"{len(report.records)} records in {report.duration_s:.2f} s "
        f"({report.builds} built, {report.cache_hits} cached; toolchain {report.toolchain.get('nvcc_version')}; "
        f"isolation {report.isolation or 'n/a'})"
    )
