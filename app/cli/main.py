"""The `kernelwiki` command line: index, lint, serve, search, verify, evidence import and export.

Each command takes `--wiki` and `--db` (or `KERNELWIKI_WIKI`, `KERNELWIKI_DB`).
Heavy imports happen inside commands so `kernelwiki lint` stays quick.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.cli.options import DbOpt, WikiOpt, evidence_option, verify_option
from app.cli.toolchains import register as register_toolchain_commands  # toolchains, matrix
from app.queue.cli import register as register_queue_commands  # worker, jobs
from app.settings import Settings
from app.tryrun.cli import register as register_token_commands  # tokens: try runs (issue 27)
from runner.verify_options import VERIFY_OPTIONS

if TYPE_CHECKING:
    from app.store import Store

cli = typer.Typer(
    help="kernelwiki: GPU kernel engineering facts, proven by compiled and executed snippets.", no_args_is_help=True
)
evidence_cli = typer.Typer(help="Evidence records made elsewhere.", no_args_is_help=True)
cli.add_typer(evidence_cli, name="evidence")
out = Console()
err = Console(stderr=True, soft_wrap=True)  # a line naming a file and line is never wrapped


def settings_for(wiki: Path | None, db: str | None, **more: object) -> Settings:
    """Settings from the environment, overridden by the options given."""
    overrides: dict[str, Any] = {
        k: v for k, v in {"wiki": wiki, "db": db, **more}.items() if v is not None
    }  # Settings validates them
    return Settings(**overrides)


def open_store(settings: Settings) -> Store:
    """The index, migrated; a damaged index is one line naming the file and the fix, and exit 1."""
    from app.opening import open_store as open_index

    with index_errors(settings):
        return open_index(settings)


@contextmanager
def index_errors(settings: Settings) -> Iterator[None]:
    """Turn 'the index file is damaged' anywhere in a command into one clear line and exit status 1."""
    from app.errors import broken_index_line

    try:
        yield
    except Exception as exc:
        line = broken_index_line(settings.db, exc)
        if line is None:
            raise
        err.print(line, markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


@cli.command()
def index(
    wiki: WikiOpt = None,
    db: DbOpt = None,
    force: Annotated[bool, typer.Option(help="reparse every file")] = False,
    rebuild: Annotated[
        bool,
        typer.Option("--rebuild", help="rebuild the index from the wiki; a damaged SQLite file is set aside, its evidence kept"),
    ] = False,
) -> None:
    """Index the wiki into the SQL index (only changed files are reparsed)."""
    settings = settings_for(wiki, db)
    if rebuild:
        from app.repair import rebuild_sqlite

        for line in rebuild_sqlite(settings.db):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    store = open_store(settings)
    with index_errors(settings):
        report = store.reindex(settings.wiki, force=force or rebuild, full_text=False)  # a server builds the full-text index
        loaded = store.evidence.load_dir(settings.evidence)
    from app.opening import queue_changed_snippets

    queue_changed_snippets(settings, store, report.changed_snippets)
    for d in report.skipped + report.diagnostics:
        typer.echo(str(d), err=True)
    out.print(
        f"indexed {settings.wiki}: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.removed)} removed, {report.unchanged} unchanged, {len(report.failed)} left out with errors, "
        f"{len(report.indexed_with_errors)} indexed with errors, "
        f"{len(report.skipped)} skipped (not pages) "
        f"in {report.seconds:.2f}s; evidence: {loaded.inserted} new records",
        highlight=False,
        soft_wrap=True,
    )


@cli.command()
def lint(
    wiki: WikiOpt = None,
    evidence: Annotated[Path | None, evidence_option("folder of evidence JSONL the claims are checked against")] = None,
) -> None:
    """Check every page, and its confidence/evidence_level against its snippets' evidence; exit 1 on errors."""
    from app.evidence.claims import lint_claims, read_evidence
    from app.evidence.measured_claims import lint_measured_claims
    from app.evidence.reproducibility import lint_reproducibility
    from app.index.pages import links_leaving, load_wiki
    from app.index.perf import lint_claims_sources, read_claims
    from snippets.extract import extract_snippets

    settings = settings_for(wiki, None, evidence=evidence)
    if not settings.wiki.is_dir():
        err.print(f"{settings.wiki}: error: not a folder", markup=False)
        raise typer.Exit(1)
    wiki_data = load_wiki(settings.wiki)
    diags = list(wiki_data.diagnostics) + links_leaving(settings.wiki)
    snippets_by_page = {}
    for page in wiki_data.pages.values():
        found, problems = extract_snippets(page.id, page.path, page.body, page.body_line, page.architectures)
        snippets_by_page[page.id] = found
        diags += problems
    records, unreadable = read_evidence(settings.evidence)
    diags += lint_claims(wiki_data.pages.values(), snippets_by_page, records)
    diags += lint_reproducibility(wiki_data.pages.values(), snippets_by_page, records)
    for page in wiki_data.pages.values():  # performance_claims: their shape, and sources that name a page
        claims, problems = read_claims(page)
        diags += problems + lint_claims_sources(page, claims, set(wiki_data.pages))
    diags += lint_measured_claims(wiki_data.pages.values(), snippets_by_page, records)
    for line in unreadable:
        typer.echo(line, err=True)
    for d in sorted(diags, key=lambda d: (d.path, d.line)):
        typer.echo(str(d), err=True)
    errors = sum(1 for d in diags if d.severity == "error") + len(unreadable)
    skipped = sum(1 for d in diags if d.severity == "info")
    warnings = len(diags) + len(unreadable) - errors - skipped
    out.print(
        f"{len(wiki_data.pages)} pages, {errors} errors, {warnings} warnings" + (f", {skipped} files skipped" if skipped else ""),
        highlight=False,
    )
    if errors:
        raise typer.Exit(1)


@cli.command()
def adopt(
    wiki: WikiOpt = None,
    write: Annotated[bool, typer.Option("--write", help="add the certain attributes to the fence lines")] = False,
) -> None:
    """Per code block that declares no attributes: what it is (program, unit, fragment, …) and what would make it verifiable."""
    from app.index.pages import load_wiki
    from snippets.adopt import advise, write_attributes

    settings = settings_for(wiki, None)
    if not settings.wiki.is_dir():
        err.print(f"{settings.wiki}: error: not a folder", markup=False)
        raise typer.Exit(1)
    wiki_data = load_wiki(settings.wiki)
    root = wiki_data.repository.root if wiki_data.repository else settings.wiki
    counts: dict[str, int] = {}
    changed = 0
    for page in sorted(wiki_data.pages.values(), key=lambda p: p.path):
        advice = advise(page.path, page.body, page.body_line)
        for a in advice:
            typer.echo(str(a))
            counts[a.classification.kind] = counts.get(a.classification.kind, 0) + 1
        if write and advice:
            changed += write_attributes(root / page.path, advice)
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    out.print(
        f"{sum(counts.values())} blocks without attributes ({summary})" + (f"; {changed} fences written" if write else ""),
        highlight=False,
    )


@cli.command()
def serve(
    wiki: WikiOpt = None,
    db: DbOpt = None,
    evidence: Annotated[Path | None, evidence_option("folder of committed evidence JSONL")] = None,
    host: Annotated[str | None, typer.Option(help="address to listen on", envvar="KERNELWIKI_HOST")] = None,
    port: Annotated[int | None, typer.Option(help="port", envvar="KERNELWIKI_PORT")] = None,
    watch: Annotated[
        bool | None,
        typer.Option("--watch/--no-watch", help="reindex as wiki files are added, changed or deleted", envvar="KERNELWIKI_WATCH"),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="worker processes for multi-core hosts, forked from one that has imported the app; they open the index read-only while this process indexes",
        ),
    ] = 1,
    try_runs: Annotated[
        bool | None,
        typer.Option(
            "--try/--no-try", help="let token holders compile and run edited snippets (docs/try.md)", envvar="KERNELWIKI_TRY"
        ),
    ] = None,
) -> None:
    """Serve the API and the docs browser at once, indexing the wiki in the background (/api/health shows progress)."""
    from app.serve import run_server

    settings = settings_for(wiki, db, evidence=evidence, host=host, port=port, watch=watch, try_enabled=try_runs)
    code = run_server(
        settings,
        workers,
        say=lambda line: out.print(line, highlight=False, markup=False, soft_wrap=True),
        warn=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True),
    )
    if code:
        raise typer.Exit(code)


@cli.command()
def mcp(
    wiki: WikiOpt = None,
    db: DbOpt = None,
    evidence: Annotated[Path | None, evidence_option("folder of evidence JSONL")] = None,
) -> None:
    """Index the wiki, then serve the MCP tools (search, get_page, get_snippet_evidence, resolve) on stdio."""
    from app.agents.mcp_server import run_stdio
    from app.opening import prepare_store

    settings = settings_for(wiki, db, evidence=evidence)
    run_stdio(settings, lambda: prepare_store(settings))


@cli.command()
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    wiki: WikiOpt = None,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the API's answer as JSON, excerpts as plain text")] = False,
    limit: int = 10,
    type: str | None = None,
    arch: str | None = None,
    tag: str | None = None,
    confidence: str | None = None,
) -> None:
    """Search the index (indexing first when needed)."""
    from rich.text import Text

    from app.index.filters import Filters
    from app.search.text import plain

    settings = settings_for(wiki, db)
    store = open_store(settings)
    store.reindex(settings.wiki)
    filters = Filters(type=type, arch=arch, tag=tag, confidence=confidence)
    problems = store.searcher.filter_problems(filters)
    for problem in problems:
        err.print(f"error: --{problem.message}", markup=False, highlight=False)
    if problems:
        raise typer.Exit(2)
    result = store.searcher.search(query, filters, limit=limit)
    for r in result.results:
        r.snippet = plain(r.snippet)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    if result.did_you_mean:
        out.print(f"did you mean: {result.did_you_mean}", highlight=False)
    table = Table("page", "title", "section", "type", "score")
    for r in result.results:
        section = f"{r.section.heading} (#{r.section.anchor})" if r.section and r.section.anchor else ""
        table.add_row(*(Text(cell) for cell in (r.id, r.title, section, r.type, f"{r.score:.2f}")))  # titles are text, not markup
    out.print(table)
    out.print(f"{result.total} results in {result.took_ms:.1f} ms", highlight=False)


@cli.command()
def verify(
    wiki: WikiOpt = None,
    db: DbOpt = None,
    page: Annotated[list[str] | None, verify_option("--page")] = None,
    target: Annotated[list[str] | None, verify_option("--target")] = None,
    jobs: Annotated[int, verify_option("--jobs")] = VERIFY_OPTIONS["--jobs"].default,
    no_cache: Annotated[bool, verify_option("--no-cache")] = False,
    compile_only: Annotated[bool, verify_option("--compile-only")] = False,
    report: Annotated[Path | None, verify_option("--report")] = None,
    store_evidence: Annotated[bool, typer.Option("--store/--no-store", help="record the evidence in the index")] = True,
    isolation: Annotated[str | None, verify_option("--isolation")] = None,
    toolchain: Annotated[
        str | None, typer.Option("--toolchain", help="an installed CUDA release (13.1; `kernelwiki toolchains list`)")
    ] = None,
    toolchains: Annotated[
        str | None, typer.Option("--toolchains", help="`all` or 13.0,13.1: the compile-only matrix instead (kernelwiki matrix)")
    ] = None,
) -> None:
    """Compile every snippet for its targets, run programs on matching GPUs, record the evidence.

    Exit code 1 when a snippet fails that was not expected to.
    """
    from runner.report import print_summary, progress_bar
    from runner.sandbox import SandboxUnavailable
    from runner.verify import verify as run_verify

    settings = settings_for(wiki, db)
    if toolchains:  # issue 24: every toolchain, compile-only, into the matrix (app/cli/toolchains.py)
        from app.cli.toolchains import run_and_write

        raise typer.Exit(
            run_and_write(
                settings.wiki,
                settings.evidence,
                [toolchains],
                pages=page,
                targets=target,
                jobs=jobs,
                isolation=isolation,
                db=settings.db if store_evidence else None,
            )
        )
    from runner.toolchains import ToolchainError, select_toolchain, toolchains_dir

    try:
        chosen = select_toolchain(toolchain, toolchains_dir().resolve()) if toolchain else None
    except ToolchainError as exc:
        err.print(f"kernelwiki verify: --toolchain: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    bar, update = progress_bar()
    if bar is not None:
        bar.start()
    try:
        result = run_verify(
            settings.wiki,
            pages=page or None,
            targets=target or None,
            jobs=jobs,
            use_cache=not no_cache,
            compile_only=compile_only,
            progress=update,
            isolation=isolation or settings.isolation,
            toolchain=chosen,
        )
    except (SandboxUnavailable, ValueError) as exc:
        err.print(f"kernelwiki verify: nothing was run: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    finally:
        if bar is not None:
            bar.stop()
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        result.write_jsonl(report)
    if store_evidence:
        store = open_store(settings)
        store.reindex(settings.wiki, full_text=False)
        records = [r.to_dict() for r in result.records]
        if chosen is not None:  # an explicitly chosen release informs, it never replaces the default toolchain's status
            for r in records:
                r["toolchain_release"] = chosen.nvcc_release or toolchain
        added = store.evidence.add(records, origin="verify")
        out.print(f"index: {added.inserted} new evidence records", highlight=False)
    print_summary(result)
    raise typer.Exit(result.exit_code)


@evidence_cli.command("export")
def evidence_export(
    output: Annotated[Path | None, typer.Argument(help="JSONL file to write (default: standard output)")] = None,
    db: DbOpt = None,
    posted: Annotated[bool, typer.Option("--posted", help="only records runners posted (POST /api/evidence)")] = False,
    matrix: Annotated[
        Path | None,
        typer.Option(
            "--matrix",
            help="also write the toolchain × target matrix (the committed file's cells and queue workers' posts, the newer"
            " of each) to this file, e.g. evidence/matrix/cells.jsonl",
        ),
    ] = None,
) -> None:
    """Write the index's evidence as JSONL (oldest first), for a backup or `evidence import` elsewhere."""
    import sys

    from app.evidence.matrix_cells import export_cells

    settings = settings_for(None, db)
    store = open_store(settings)
    with index_errors(settings):
        if matrix is not None:
            cells = export_cells(store.engine, matrix)
            err.print(f"exported {cells} matrix cells to {matrix}", highlight=False, markup=False)
        if output is None:
            count = store.evidence.export_jsonl(sys.stdout, origin="request" if posted else None)
        else:
            output.parent.mkdir(parents=True, exist_ok=True)
            tmp = output.with_name(output.name + ".tmp")
            with tmp.open("w", encoding="utf-8") as fh:
                count = store.evidence.export_jsonl(fh, origin="request" if posted else None)
            tmp.replace(output)
    err.print(f"exported {count} evidence records" + (f" to {output}" if output else ""), highlight=False, markup=False)


@evidence_cli.command("import")
def evidence_import(
    files: Annotated[list[Path], typer.Argument(help="JSONL files of evidence records")], wiki: WikiOpt = None, db: DbOpt = None
) -> None:
    """Attach evidence produced elsewhere; importing the same records twice changes nothing."""
    settings = settings_for(wiki, db)
    store = open_store(settings)
    store.reindex(settings.wiki, full_text=False)
    bad = False
    for path in files:
        result = store.evidence.import_jsonl(path)
        for e in result.errors:
            err.print(e, markup=False, highlight=False)
        bad = bad or bool(result.errors)
        out.print(
            f"{path}: {result.inserted} new, {result.duplicates} already present, {len(result.errors)} rejected", highlight=False
        )
    store.engine.dispose()  # its pooled connections closed now, not left to the garbage collector
    if bad:
        raise typer.Exit(1)


register_queue_commands(cli)
register_toolchain_commands(cli)
register_token_commands(cli)


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":  # pragma: no cover
    main()
