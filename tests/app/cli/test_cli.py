"""The `kernelwiki` command line: what `--help` tells, and how a missing optional extra is reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELWIKI = [sys.executable, "-m", "app.cli.main"]
WIDE = {**os.environ, "COLUMNS": "250", "TERM": "dumb", "NO_COLOR": "1"}


def help_text(*command: str) -> str:
    done = subprocess.run([*KERNELWIKI, *command, "--help"], capture_output=True, text=True, env=WIDE, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        (
            ["serve"],
            ["KERNELWIKI_WIKI", "KERNELWIKI_DB", "KERNELWIKI_EVIDENCE", "KERNELWIKI_HOST", "KERNELWIKI_PORT", "KERNELWIKI_WATCH"],
        ),
        (["lint"], ["KERNELWIKI_WIKI", "KERNELWIKI_EVIDENCE"]),
        (["verify"], ["KERNELWIKI_WIKI", "KERNELWIKI_DB", "KERNELWIKI_ISOLATION"]),
        (["worker"], ["KERNELWIKI_SERVER_URL", "KERNELWIKI_QUEUE_DATABASE_URL", "KERNELWIKI_DB"]),
        (["jobs"], ["KERNELWIKI_QUEUE_DATABASE_URL", "KERNELWIKI_DB"]),
        (["matrix"], ["KERNELWIKI_WIKI", "KERNELWIKI_ISOLATION", "KERNELWIKI_TOOLCHAINS"]),
    ],
)
def test_help_names_the_environment_variable_of_each_option(command: list[str], variables: list[str]) -> None:
    text = help_text(*command)
    for name in variables:
        assert f"env var: {name}" in text, f"`kernelwiki {' '.join(command)} --help` does not name {name}:\n{text}"


def test_an_option_reads_its_environment_variable(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli.main import cli

    missing = tmp_path / "no-such-wiki"
    result = CliRunner().invoke(cli, ["lint"], env={"KERNELWIKI_WIKI": str(missing)})
    assert result.exit_code == 1
    assert f"{missing}: error: not a folder" in result.output  # one line, never wrapped


@pytest.mark.parametrize("command", [["worker", "--scheduler"], ["worker", "--target", "sm_90a", "--check"], ["jobs"]])
def test_queue_commands_without_the_pg_extra_say_how_to_install_it(command: list[str]) -> None:
    hide = "import sys; sys.modules['procrastinate'] = None; sys.argv = ['kernelwiki', *sys.argv[1:]]; "
    hide += "from app.cli.main import main; main()"
    done = subprocess.run([sys.executable, "-c", hide, *command], capture_output=True, text=True, env=WIDE, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
    assert "pip install 'kernelwiki[pg]'" in done.stderr
    assert f"kernelwiki {command[0]}: " in done.stderr


def test_both_verify_command_lines_take_the_shared_options_with_the_same_help() -> None:
    from runner.verify_options import VERIFY_OPTIONS

    ours = " ".join(help_text("verify").split())
    done = subprocess.run(
        [sys.executable, "-m", "runner", "verify", "--help"], capture_output=True, text=True, env=WIDE, timeout=60
    )
    runners = " ".join(done.stdout.split())
    for option in VERIFY_OPTIONS.values():
        for text in (ours, runners):
            assert option.flag in text and option.help in text, (option.flag, text)
        if option.env:
            assert f"env var: {option.env}" in ours and f"[env {option.env}]" in runners
