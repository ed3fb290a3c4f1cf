"""The options both `verify` command lines take, written once: `python3 -m runner verify` (argparse; the runner
stays standard-library only for GPU nodes) and `kernelwiki verify` (typer, app/cli/main.py) read this table for
each option's name, default and help. Options only one of them has (`--cache-dir`, `--nvcc`, `--json`; `--db`,
`--store`, `--toolchain`) are declared where they are used."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from runner.settings import ISOLATION_CHOICES


@dataclass(frozen=True)
class VerifyOption:
    """One option of `verify`."""

    flag: str  # e.g. "--jobs"
    help: str  # one line, as --help shows it
    default: Any = None  # None: not given
    repeatable: bool = False  # may be given many times; the value is a list
    switch: bool = False  # takes no value: given means True
    metavar: str | None = None  # the value's name in --help
    choices: tuple[str, ...] | None = None  # the only values allowed (argparse checks them)
    env: str | None = None  # the KERNELWIKI_* variable that gives it when the option is not given


VERIFY_OPTIONS: dict[str, VerifyOption] = {
    o.flag: o
    for o in (
        VerifyOption("--page", "only this page id (repeatable)", repeatable=True, metavar="ID"),
        VerifyOption("--target", "only this target, e.g. sm_90a (repeatable)", repeatable=True, metavar="SM"),
        VerifyOption("--jobs", "parallel builds", default=2),
        VerifyOption("--no-cache", "ignore cached results", switch=True),
        VerifyOption("--compile-only", "build programs but do not run them", switch=True),
        VerifyOption("--report", "also write the evidence records to this JSONL file"),
        VerifyOption(
            "--isolation",
            "sandbox of compiles and runs: bwrap (default), or unshare-net / none / auto to accept weaker isolation explicitly",
            choices=ISOLATION_CHOICES,
            env="KERNELWIKI_ISOLATION",
        ),
    )
}


def add_verify_options(parser: argparse.ArgumentParser) -> None:
    """Every option of the table on an argparse (sub)parser."""
    for o in VERIFY_OPTIONS.values():
        text = f"{o.help} [env {o.env}]" if o.env else o.help
        if o.switch:
            parser.add_argument(o.flag, action="store_true", help=text)
        elif o.repeatable:
            parser.add_argument(o.flag, action="append", default=[], metavar=o.metavar, help=text)
        else:
            kind = type(o.default) if o.default is not None else str
            shown = f"{text} (default {o.default})" if o.default is not None else text
            parser.add_argument(o.flag, type=kind, default=o.default, choices=o.choices, metavar=o.metavar, help=shown)
