"""Options several `kernelwiki` commands share. An option backed by a `KERNELWIKI_*` setting names its variable
with `envvar=`, so `--help` shows `[env var: …]` (a hint written in the help text would be eaten as Rich markup)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

WikiOpt = Annotated[Path | None, typer.Option("--wiki", help="wiki folder", envvar="KERNELWIKI_WIKI")]
DbOpt = Annotated[str | None, typer.Option("--db", help="index URL", envvar="KERNELWIKI_DB")]
IsolationOpt = Annotated[
    str | None,
    typer.Option(
        "--isolation",
        help="sandbox: bwrap (default), or unshare-net / none / auto to accept weaker isolation explicitly",
        envvar="KERNELWIKI_ISOLATION",
    ),
]


def evidence_option(help: str) -> object:
    """`--evidence`, a folder of evidence JSONL; what it is for differs per command."""
    return typer.Option("--evidence", help=help, envvar="KERNELWIKI_EVIDENCE")
