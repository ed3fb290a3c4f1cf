"""`kernelwiki tokens create|revoke|list`: API tokens for try runs (docs/try.md). Not the runner token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

tokens_cli = typer.Typer(
    help="API tokens of people and agents for try runs (stored hashed; reading needs none).", no_args_is_help=True
)
out = Console()
err = Console(stderr=True, soft_wrap=True)  # a line naming a file and line is never wrapped
DbOpt = Annotated[
    str | None, typer.Option("--db", help="index URL", envvar="KERNELWIKI_DB")
]  # as app.cli.options has it (floors)


def _engine(db: str | None) -> Engine:
    """The index database, migrated (the token table exists)."""
    from app.index.db import create_schema, make_engine
    from app.settings import Settings

    engine = make_engine((Settings(db=db) if db else Settings()).db, pool_size=1, max_overflow=1)
    create_schema(engine)
    return engine


@tokens_cli.command("create")
def create(
    name: Annotated[str, typer.Argument(help="whose token: a person's or an agent's handle")],
    compiles_per_hour: Annotated[
        int | None,
        typer.Option(
            "--compiles-per-hour", min=0, help="try runs per hour (default: the setting KERNELWIKI_TRY_COMPILES_PER_HOUR)"
        ),
    ] = None,
    gpu_seconds_per_day: Annotated[
        int | None,
        typer.Option(
            "--gpu-seconds-per-day",
            min=0,
            help="GPU seconds per 24 hours (default: the setting KERNELWIKI_TRY_GPU_SECONDS_PER_DAY)",
        ),
    ] = None,
    db: DbOpt = None,
) -> None:
    """Make a token for NAME and print it on the last line (it is shown only now: only its hash is kept)."""
    from app.tryrun.tokens import TokenError, create_token

    engine = _engine(db)
    try:
        token = create_token(engine, name, compiles_per_hour, gpu_seconds_per_day)
    except TokenError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
    quotas = ", ".join(
        [
            f"{compiles_per_hour} runs per hour" if compiles_per_hour is not None else "the default runs per hour",
            f"{gpu_seconds_per_day} GPU seconds per day"
            if gpu_seconds_per_day is not None
            else "the default GPU seconds per day",
        ]
    )
    err.print(f"token for '{name}' ({quotas}); keep it secret, it is not shown again:", markup=False, highlight=False)
    typer.echo(token)


@tokens_cli.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="the token's name")], db: DbOpt = None) -> None:
    """Revoke NAME's token: it is refused from now on (403)."""
    from app.tryrun.tokens import revoke_token

    engine = _engine(db)
    try:
        done = revoke_token(engine, name)
    finally:
        engine.dispose()
    if not done:
        err.print(f"error: no active token named '{name}' (`kernelwiki tokens list` shows them)", markup=False, highlight=False)
        raise typer.Exit(1)
    out.print(f"revoked the token of '{name}'", markup=False, highlight=False)


@tokens_cli.command("list")
def list_(db: DbOpt = None) -> None:
    """Every token: name, quotas, when made and revoked (never the token: it is not kept)."""
    from app.tryrun.tokens import list_tokens

    engine = _engine(db)
    try:
        rows = list_tokens(engine)
    finally:
        engine.dispose()
    table = Table("name", "runs/hour", "GPU s/day", "created", "revoked", "sha256", box=None)
    for r in rows:
        table.add_row(
            r.name,
            "default" if r.compiles_per_hour is None else str(r.compiles_per_hour),
            "default" if r.gpu_seconds_per_day is None else str(r.gpu_seconds_per_day),
            r.created_at[:19] + "Z",
            (r.revoked_at[:19] + "Z") if r.revoked_at else "",
            r.token_hash[:12] + "…",
        )
    out.print(table)
    if not rows:
        out.print("no tokens yet: `kernelwiki tokens create NAME`", markup=False, highlight=False)


def register(cli: typer.Typer) -> None:
    """Add `tokens` to the `kernelwiki` command."""
    cli.add_typer(tokens_cli, name="tokens")
