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


def test_index_counts_the_files_left_out_and_the_pages_indexed_with_errors(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The summary counts what the error lines above it say: files left out (unreadable, a duplicate id) apart from
    pages indexed with schema or other errors; before, a page breaking its schema was counted nowhere ("0 with errors")."""
    import re
    import shutil

    from typer.testing import CliRunner

    from app.cli.main import cli

    repo = Path(shutil.copytree(Path(__file__).parents[2] / "fixtures" / "kwrepo", tmp_path / "repo"))
    (repo / "wiki" / "hardware" / "broken.md").write_text("---\nid: [unclosed\n---\n# Broken\n", encoding="utf-8")
    (tmp_path / "evidence").mkdir()
    monkeypatch.setenv("KERNELWIKI_EVIDENCE", str(tmp_path / "evidence"))
    argv = ["index", "--wiki", str(repo), "--db", f"sqlite:///{tmp_path / 'index.db'}"]
    first = CliRunner().invoke(cli, argv)
    assert first.exit_code == 0, first.output
    erring = {line.split(":", 1)[0] for line in first.stderr.splitlines() if ": error: " in line}
    assert "wiki/hardware/broken.md" in erring and len(erring) >= 3, first.stderr
    summary = " ".join(first.stdout.split())
    counts = re.search(r"(\d+) left out with errors, (\d+) indexed with errors,", summary)
    assert counts is not None, summary
    assert (int(counts[1]), int(counts[2])) == (1, len(erring) - 1), (summary, sorted(erring))
    # Again: the file left out is read again (and counted), the unchanged pages are not (their findings stay stored).
    again = " ".join(CliRunner().invoke(cli, argv).stdout.split())
    assert "1 left out with errors, 0 indexed with errors," in again, again
