"""`kernelwiki adopt`: per block without attributes, what it is; --write adds the certain attributes and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from runner.verify import load_snippets

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "kwrepo"
CLI = [sys.executable, "-c", "from app.cli.main import cli; cli()"]


def test_adopt_prints_each_block_and_write_adds_attributes(tmp_path: Path) -> None:
    repo = Path(shutil.copytree(REPO, tmp_path / "repo"))
    before = (repo / "wiki/hardware/bulk-copy.md").read_text()
    shown = subprocess.run([*CLI, "adopt", "--wiki", str(repo)], capture_output=True, text=True, timeout=120, check=True)
    assert "wiki/hardware/bulk-copy.md:34: cuda block: fragment:" in shown.stdout
    assert "wiki/techniques/pipelining.md:16: python block: script:" in shown.stdout
    assert "9 blocks without attributes (3 fragment, 1 program, 1 ptx-fragment, 3 script, 1" in shown.stdout
    assert (repo / "wiki/hardware/bulk-copy.md").read_text() == before  # without --write nothing changes

    subprocess.run([*CLI, "adopt", "--wiki", str(repo), "--write"], capture_output=True, text=True, timeout=120, check=True)
    after = (repo / "wiki/hardware/bulk-copy.md").read_text()
    assert "```cuda run\n" in after and "```cuda sketch\n" in after and "```ptx sketch\n" in after
    assert (
        after.replace("```cuda run", "```cuda").replace("```cuda sketch", "```cuda").replace("```ptx sketch", "```ptx") == before
    )
    snippets, problems = load_snippets(repo)
    assert problems == []
    modes = {s.id: s.mode for s in snippets}
    assert modes["hw-bulk-copy:2"] == "sketch" and modes["barrier-notes:1"] == "compile"
    assert modes["technique-pipelining:1"] == "compile"  # Python left as it was
    again = subprocess.run([*CLI, "adopt", "--wiki", str(repo)], capture_output=True, text=True, timeout=120, check=True)
    assert "3 blocks without attributes (3 script)" in again.stdout  # only the Python blocks are left to their authors
