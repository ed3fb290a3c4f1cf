"""Options several `kernelwiki` commands share. An option backed by a `KERNELWIKI_*` setting names its variable
with `envvar=`, so `--help` shows `[env var: …]` (a hint written in the help text would be eaten as Rich markup)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.verify_options import VERIFY_OPTIONS


def verify_option(flag: str) -> Any:
    """An option `kernelwiki verify` shares with `python3 -m runner verify`: its name, help and variable from
    runner/verify_options.py (the one table both command lines read)."""
    o = VERIFY_OPTIONS[flag]
    return typer.Option(flag, help=o.help, metavar=o.metavar, envvar=o.env)


WikiOpt = Annotated[Path | None, typer.Option("--wiki", help="wiki folder", envvar="KERNELWIKI_WIKI")]
DbOpt = Annotated[str | None, typer.Option("--db", help="index URL", envvar="KERNELWIKI_DB")]
IsolationOpt = Annotated[str | None, verify_option("--isolation")]


def evidence_option(help: str) -> object:
    """`--evidence`, a folder of evidence JSONL; what it is for differs per command."""
    return typer.Option("--evidence", help=help, envvar="KERNELWIKI_EVIDENCE")
