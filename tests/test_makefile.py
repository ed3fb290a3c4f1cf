"""The Makefile's promises: `make serve PORT=…` serves there with the base install, and a system step that
needs root is skipped with a message for other users but fails under CI=true.

Non-root is simulated with an `id` on PATH that answers 1000, so no test here
ever runs apt-get; `make -n` shows what serve would run without running it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAKE_TIMEOUT_S = 60


def make(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    make_bin = shutil.which("make")
    if make_bin is None:
        pytest.fail("make is missing")
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "id").write_text("#!/bin/sh\necho 1000\n")
    (fake / "id").chmod(0o755)
    # Not what an outer `make test` passes down: its command-line variables (VERIFY_NICE=10) reach pytest's environment.
    environment = {
        k: v for k, v in os.environ.items() if k not in ("CI", "MAKEFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VERIFY_NICE")
    }
    environment.update(PATH=f"{fake}:{os.environ['PATH']}", **env)
    return subprocess.run(
        [make_bin, "-s", "-C", str(REPO), *args],
        capture_output=True,
        text=True,
        timeout=MAKE_TIMEOUT_S,
        env=environment,
        check=False,
    )


def test_make_serve_takes_port_and_host_and_installs_no_extras(tmp_path: Path) -> None:
    done = make(["-n", "serve", "PORT=8001", "HOST=0.0.0.0"], tmp_path)
    assert done.returncode == 0, done.stderr
    serve = [line for line in done.stdout.splitlines() if "kernelwiki serve" in line]
    assert serve and "--host 0.0.0.0" in serve[0] and "--port 8001" in serve[0]
    assert "[dev" not in done.stdout and "playwright" not in done.stdout


def test_a_missing_root_only_tool_is_skipped_with_a_message_but_fails_under_ci(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-chromium")
    skipped = make(["browser"], tmp_path, KERNELWIKI_CHROMIUM=missing)
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped: Chromium is missing" in skipped.stdout and "apt-get install chromium" in skipped.stdout
    failed = make(["browser"], tmp_path, KERNELWIKI_CHROMIUM=missing, CI="true")
    assert failed.returncode != 0
    assert "required with CI=true" in failed.stderr


def test_make_test_runs_the_compiles_niced_beside_pytest_and_verify_compile_alone_at_normal_priority(tmp_path: Path) -> None:
    # `make -n` prints each recipe; the recursive makes of `test` run, also dry (they print theirs).
    whole = make(["-n", "test"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    verify = [line for line in whole.stdout.splitlines() if "kernelwiki verify" in line]
    assert verify and verify[0].split()[:3] == ["nice", "-n", "10"], verify
    assert any("pytest" in line and "nice" not in line for line in whole.stdout.splitlines() if "-m pytest" in line)
    alone = make(["-n", "verify-compile"], tmp_path)
    assert alone.returncode == 0, alone.stderr
    plain = [line for line in alone.stdout.splitlines() if "kernelwiki verify" in line]
    assert plain and "nice" not in plain[0], plain
