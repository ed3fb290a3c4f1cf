"""CLI commands of the job queue: `kernelwiki worker` and `kernelwiki jobs` (see docs/deploy.md)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    import procrastinate

    from app.settings import Settings

out = Console()

QueueDbOpt = Annotated[
    str | None,
    typer.Option(
        "--queue-db",
        help="PostgreSQL URL of the job queue (default: --db when PostgreSQL)",
        envvar="KERNELWIKI_QUEUE_DATABASE_URL",
    ),
]
DbOpt = Annotated[str | None, typer.Option("--db", help="index URL, for the scheduler and --enqueue", envvar="KERNELWIKI_DB")]


PG_EXTRA = frozenset({"procrastinate", "psycopg", "httpx"})
"""The modules of the `pg` extra (pyproject.toml) that `worker` and `jobs` need."""

P = ParamSpec("P")
R = TypeVar("R")


def needs_pg_extra(command: Callable[P, R]) -> Callable[P, R]:
    """A module of the `pg` extra missing: one line naming the fix and exit 2, not a traceback."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ImportError as exc:
            missing = (exc.name or "").partition(".")[0]
            if missing not in PG_EXTRA:
                raise
            typer.echo(
                f"kernelwiki {command.__name__}: the job queue needs the pg extra ({missing} is not installed): "
                "pip install 'kernelwiki[pg]'",
                err=True,
            )
            raise typer.Exit(2) from None

    return run


def _settings(**overrides: Any) -> Settings:
    from app.settings import Settings

    return Settings(**{k: v for k, v in overrides.items() if v is not None})


@needs_pg_extra
def worker(
    target: Annotated[
        list[str] | None, typer.Option("--target", help="a queue to serve, e.g. sm_90a (repeatable); needs a GPU that runs it")
    ] = None,
    scheduler: Annotated[
        bool, typer.Option("--scheduler", help="serve the control queue instead: on-edit sweep and nightly fan-out")
    ] = False,
    toolchains: Annotated[
        str | None,
        typer.Option(
            "--toolchains",
            help="serve the matrix compile jobs of these installed CUDA releases (13.0,13.1, or `all`); no GPU needed",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="only say whether this machine can serve --target (exit 0) or not (exit 2)")
    ] = False,
    server: Annotated[
        str | None, typer.Option("--server", help="service URL evidence is posted to", envvar="KERNELWIKI_SERVER_URL")
    ] = None,
    queue_db: QueueDbOpt = None,
    db: DbOpt = None,
) -> None:
    """Consume a target's verification queue on this GPU node (or, with --scheduler, the control queue)."""
    from app.queue.target_check import WorkerRefused, check_sandbox, check_targets
    from app.queue.worker import run_gpu_worker, run_matrix_worker, run_scheduler

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if scheduler == bool(target or toolchains) or (scheduler and toolchains):
        typer.echo("give --target TARGET (a GPU worker), --toolchains RELEASES (a matrix worker), both, or --scheduler", err=True)
        raise typer.Exit(2)
    settings = _settings(server_url=server, queue_database_url=queue_db, db=db)
    try:
        if check:
            gpus, toolchain = check_targets(target or [], settings.toolchain)
            level = check_sandbox(settings.isolation)
            names = ", ".join(f"{g.name} (compute capability {g.compute_capability})" for g in gpus)
            typer.echo(f"{', '.join(target or [])}: ready on {names} with {toolchain.label}, isolation {level}")
            return
        if scheduler:
            run_scheduler(settings)
        elif target:
            run_gpu_worker(settings, target, toolchains=[toolchains] if toolchains else None)
        else:
            run_matrix_worker(settings, [toolchains or "all"])
    except WorkerRefused as exc:
        typer.echo(f"kernelwiki worker: refusing to start: {exc}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:  # settings that cannot work (no queue database)
        typer.echo(f"kernelwiki worker: {exc}", err=True)
        raise typer.Exit(2) from None


@needs_pg_extra
def jobs(
    enqueue: Annotated[
        bool, typer.Option("--enqueue", help="fan out every snippet × target now (as the nightly task does)")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="with --enqueue: redo what is verified with the same hash and toolchain")
    ] = False,
    target: Annotated[list[str] | None, typer.Option("--target", help="with --enqueue: only these targets")] = None,
    matrix: Annotated[
        bool, typer.Option("--matrix", help="with --enqueue: the toolchain matrix too, incrementally (as the nightly task)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    queue_db: QueueDbOpt = None,
    db: DbOpt = None,
) -> None:
    """Queued, running, stalled and failed verification jobs per target."""
    from app.queue.scheduler import Scheduler
    from app.queue.tasks import build_app, ensure_schema

    settings = _settings(queue_database_url=queue_db, db=db)
    try:
        app = build_app(settings)
    except ValueError as exc:
        typer.echo(f"kernelwiki jobs: {exc}", err=True)
        raise typer.Exit(2) from None
    ensure_schema(settings)
    with app.open():
        if enqueue:
            from app.store import Store

            store = Store(settings.db)
            store.create_schema()
            scheduler = Scheduler(app, store, settings)
            report = scheduler.enqueue(targets=target or None, force=force)
            out.print(report.summary(), highlight=False)
            if matrix:
                out.print(f"matrix: {scheduler.enqueue_matrix(force=force).summary()}", highlight=False)
            store.engine.dispose()
    counts = asyncio.run(_counts(app, settings.stalled_after_s))
    if as_json:
        typer.echo(json.dumps(counts, indent=2, sort_keys=True))
        return
    table = Table("queue", "queued", "running", "stalled", "failed")
    for queue in sorted(set(counts) | set(settings.targets)):
        row = counts.get(queue, {})
        table.add_row(queue, *(str(row.get(k, 0)) for k in ("queued", "running", "stalled", "failed")))
    out.print(table)


async def _counts(app: procrastinate.App, stalled_after_s: float) -> dict[str, dict[str, int]]:
    from app.queue.tasks import job_counts

    async with app.open_async():
        return await job_counts(app, stalled_after_s)


def register(cli: typer.Typer) -> None:
    """Add `worker` and `jobs` to the kernelwiki command line."""
    cli.command()(worker)
    cli.command()(jobs)
