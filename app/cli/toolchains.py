"""`kernelwiki toolchains install|list` and `kernelwiki matrix`: CUDA releases side by side (runner/toolchains.py,
runner/matrix.py).

    kernelwiki toolchains install 12.9 13.1 13.5 disasm   wheels into .kernelwiki/toolchains/<release>
    kernelwiki toolchains list
    kernelwiki matrix --toolchains all                     every snippet × target × toolchain, compile-only;
                                                           EVIDENCE/matrix/cells.jsonl + EVIDENCE/artifacts
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.cli.options import DbOpt, IsolationOpt, WikiOpt

out = Console()
err = Console(stderr=True, soft_wrap=True)  # a line naming a file and line is never wrapped

toolchains_cli = typer.Typer(help="CUDA toolchains installed from pip wheels, one folder per release.", no_args_is_help=True)

RootOpt = Annotated[
    Path | None,
    typer.Option("--root", help="where toolchains live (default .kernelwiki/toolchains)", envvar="KERNELWIKI_TOOLCHAINS"),
]


def _root(root: Path | None) -> Path:
    from runner.toolchains import toolchains_dir

    return (root or toolchains_dir()).resolve()


@toolchains_cli.command("install")
def install(
    releases: Annotated[list[str], typer.Argument(help="CUDA releases (12.9, 13.1, …) and/or `disasm` (the shared nvdisasm)")],
    root: RootOpt = None,
    force: Annotated[bool, typer.Option("--force", help="reinstall what is there")] = False,
) -> None:
    """Install each release's wheels with pip into its own folder (nothing system-wide); prints size and time."""
    from runner.toolchains import ToolchainError, install_toolchain

    failed = False
    for release in releases:
        try:
            result = install_toolchain(release, _root(root), force=force)
        except ToolchainError as exc:
            err.print(f"kernelwiki toolchains install: {exc}", markup=False, highlight=False)
            failed = True
            continue
        if result.error:
            err.print(f"CUDA {release}: {result.error}", markup=False, highlight=False)
            failed = True
        else:
            what = ", ".join(f"{k} {v}" for k, v in result.packages.items())
            state = "already installed" if result.already else f"installed in {result.seconds:.1f} s"
            out.print(f"{release}: {state}, {result.bytes_on_disk / 1e6:.0f} MB: {what}", markup=False, highlight=False)
    raise typer.Exit(1 if failed else 0)


@toolchains_cli.command("list")
def list_toolchains(root: RootOpt = None) -> None:
    """The installed releases (and the system nvcc), with their tools."""
    from runner.toolchains import SYSTEM, disassembler, installed_releases, select_toolchain

    base = _root(root)
    table = Table("release", "toolchain", "nvcc (or NVRTC: device code only)", "ptxas")
    for name in [SYSTEM, *installed_releases(base)]:
        tc = select_toolchain(name, base)
        table.add_row(name, tc.label, tc.nvcc or tc.nvrtc or "—", tc.ptxas or "—")
    out.print(table)
    out.print(f"disassembler: {disassembler(base)[0] or 'not installed (`kernelwiki toolchains install disasm`)'}")


def run_and_write(
    wiki: Path,
    evidence: Path,
    names: list[str],
    *,
    root: Path | None = None,
    pages: list[str] | None = None,
    targets: list[str] | None = None,
    jobs: int = 2,
    isolation: str | None = None,
    db: str | None = None,
) -> int:
    """Run the matrix and merge its cells into EVIDENCE/matrix/cells.jsonl, and into the index at `db` when given
    (`matrix_cell`, what the service reads); returns the exit code (1: a cell failed)."""
    from app.evidence.artifacts import ARTIFACTS_DIR, MATRIX_FILE
    from runner.artifacts import ArtifactStore
    from runner.matrix import find_flips, matrix_stamp, read_cells, run_matrix, write_cells
    from runner.status import FAILING
    from runner.toolchains import expand

    base = _root(root)
    started = time.monotonic()
    names = expand(names, base)
    path = evidence / MATRIX_FILE
    stamp_file = path.with_name("stamp")
    stamp = matrix_stamp(wiki, names, base, [str(pages), str(targets)])
    if path.is_file() and stamp_file.is_file() and stamp_file.read_text(encoding="utf-8").strip() == stamp:
        out.print(f"matrix: nothing changed (pages, toolchains, runner), {time.monotonic() - started:.2f} s", highlight=False)
        _load_into_index(db, evidence)
        return 1 if any(c.status in FAILING for c in read_cells(path)) else 0
    report = run_matrix(
        wiki,
        names,
        base,
        store=ArtifactStore(evidence / ARTIFACTS_DIR),
        pages=pages,
        targets=targets,
        jobs=jobs,
        isolation=isolation,
        progress=lambda release, seconds, builds, hits: out.print(
            f"CUDA {release}: {seconds:.1f} s, {builds} built, {hits} from the cache", highlight=False
        ),
    )
    fresh = {(c.snippet_id, c.target, c.release) for c in report.cells}
    ran_pages = {c.page_id for c in report.cells}
    kept = []
    if path.is_file():
        # Cells of pages and releases this run did not cover stay; those it covered are replaced (a removed snippet goes).
        kept = [
            c
            for c in read_cells(path)
            if (c.snippet_id, c.target, c.release) not in fresh and not (c.page_id in ran_pages and c.release in report.releases)
        ]
    cells = kept + report.cells
    write_cells(path, cells)
    stamp_file.write_text(stamp + "\n", encoding="utf-8")
    _load_into_index(db, evidence)
    flips = find_flips(cells)
    out.print(
        f"matrix: {len(report.cells)} cells ({len(cells)} kept in {path}), {len(flips)} flips, "
        f"{time.monotonic() - started:.1f} s",
        highlight=False,
    )
    return 1 if any(c.status in FAILING for c in report.cells) else 0


def _load_into_index(db: str | None, evidence: Path) -> None:
    """Bring the index's `matrix_cell` up to date with the file (app/evidence/matrix_cells.py), when an index is named."""
    if db is None:
        return
    from app.evidence.matrix_cells import load_matrix_file
    from app.index.db import create_schema, make_engine

    engine = make_engine(db)
    try:
        create_schema(engine)
        loaded = load_matrix_file(engine, evidence)
    finally:
        engine.dispose()
    for line in loaded.errors:
        err.print(line, markup=False, highlight=False)
    out.print(
        f"index: {loaded.inserted} new cells, {loaded.replaced} replaced, {loaded.removed} removed ({db.split('://')[0]})",
        highlight=False,
    )


def matrix(
    wiki: WikiOpt = None,
    toolchains: Annotated[
        list[str] | None, typer.Option("--toolchains", help="releases (13.0,13.1), `system`, or `all` (default)")
    ] = None,
    page: Annotated[list[str] | None, typer.Option("--page", help="only this page id (repeatable)")] = None,
    target: Annotated[list[str] | None, typer.Option("--target", help="only this target (repeatable)")] = None,
    jobs: Annotated[int, typer.Option(help="parallel builds")] = 2,
    root: RootOpt = None,
    isolation: IsolationOpt = None,
    db: DbOpt = None,
) -> None:
    """Compile every snippet with every toolchain (cached by content and toolchain), keep SASS/PTX, find flips."""
    from app.settings import Settings
    from runner.sandbox import SandboxUnavailable
    from runner.toolchains import ToolchainError

    given: dict[str, Any] = {k: v for k, v in (("wiki", wiki), ("db", db)) if v is not None}
    settings = Settings(**given)  # the environment, --wiki and --db
    try:
        code = run_and_write(
            settings.wiki,
            settings.evidence,
            toolchains or ["all"],
            root=root,
            pages=page or None,
            targets=target or None,
            jobs=jobs,
            isolation=isolation or settings.isolation,
            db=settings.db,
        )
    except (SandboxUnavailable, ToolchainError) as exc:
        err.print(f"kernelwiki matrix: nothing was run: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def register(cli: typer.Typer) -> None:
    """Add `toolchains` and `matrix` to the kernelwiki command line."""
    cli.add_typer(toolchains_cli, name="toolchains")
    cli.command("matrix")(matrix)
