"""Packaging: every package the code imports is declared, and a bare install (no extras) serves, indexes and searches.

The first test reads the imports of app/, snippets/ and runner/ (module level and
inside functions) and maps each to the distribution that provides it; a package
that is imported but named in no dependency list of pyproject.toml fails it,
with the file and line of the import.

The second builds the package into a fresh virtual environment with a plain
`pip install` of the project (no extras: no PostgreSQL driver, no queue, no test
tools) and runs `kernelwiki index`, `kernelwiki search` and `kernelwiki serve`
on SQLite against it, the way a newcomer's first commands would.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("app", "snippets", "runner")
PACKAGE_FILES = ("pyproject.toml", "README.md", *FIRST_PARTY)
FIXTURE_WIKI = Path(__file__).parent / "fixtures" / "wiki"

NOT_INSTALLED_HERE = {"cupy": "cupy-cuda13x"}
"""Import name → distribution for optional packages a test machine may lack (the CuPy wheel is CUDA-specific)."""

PIP_TIMEOUT_S = 300
CLI_TIMEOUT_S = 120
SERVE_START_TIMEOUT_S = 60


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalize(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def declared() -> dict[str, set[str]]:
    """Distribution names per dependency list of pyproject.toml: "" for the base, else the extra's name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lists = {"": project.get("dependencies", []), **project.get("optional-dependencies", {})}
    return {name: {_requirement_name(r) for r in reqs} for name, reqs in lists.items()}


def imports_of(folder: Path) -> list[tuple[str, Path, int]]:
    """(top-level module, file, line) for every absolute import in the Python files under `folder`."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(alias.name.split(".")[0], path, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module.split(".")[0], path, node.lineno))
    return found


def third_party_imports() -> list[tuple[str, Path, int]]:
    local = set(FIRST_PARTY) | {"__future__"}
    return [
        (module, path, line)
        for folder in FIRST_PARTY
        for module, path, line in imports_of(REPO / folder)
        if module not in sys.stdlib_module_names and module not in local
    ]


@functools.cache
def _provided_by() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def distributions_of(module: str) -> set[str]:
    found = _provided_by().get(module, [])
    names = {_normalize(d) for d in found}
    if not names and module in NOT_INSTALLED_HERE:
        names = {NOT_INSTALLED_HERE[module]}
    return names


def test_the_import_scan_sees_the_known_third_party_imports() -> None:
    modules = {module for module, _, _ in third_party_imports()}
    # If the scan broke (wrong folder, no files), the next test would pass vacuously.
    assert {"fastapi", "sqlalchemy", "alembic", "yaml", "procrastinate"} <= modules


def test_every_imported_package_is_declared_in_pyproject() -> None:
    lists = declared()
    everything = set().union(*lists.values())
    undeclared = []
    for module, path, line in third_party_imports():
        dists = distributions_of(module)
        if not dists:
            undeclared.append(f"{path.relative_to(REPO)}:{line}: imports '{module}', which no installed distribution provides")
        elif not dists & everything:
            undeclared.append(
                f"{path.relative_to(REPO)}:{line}: imports '{module}' ({', '.join(sorted(dists))}), not declared in pyproject.toml"
            )
    assert not undeclared, "\n".join(sorted(set(undeclared)))


def test_the_base_holds_what_sqlite_serving_needs_and_the_postgresql_extra_repeats_none_of_it() -> None:
    lists = declared()
    assert {"alembic", "sqlalchemy", "sqlmodel", "pydantic", "starlette", "fastapi", "uvicorn"} <= lists[""]
    assert {"psycopg", "procrastinate"} <= lists["pg"] and lists["pg"].isdisjoint(lists[""])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_a_bare_install_indexes_searches_and_serves_on_sqlite(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in PACKAGE_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it (--python): no ensurepip
    bin_dir = env_dir / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")]
    done = _run([*pip, "install", "-q", str(source)], tmp_path, PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = _run([*pip, "list", "--format=json"], tmp_path, CLI_TIMEOUT_S)
    installed = {_normalize(d["name"]) for d in json.loads(listed.stdout)}
    assert not installed & (declared()["pg"] | declared()["dev"]), "the bare install pulled in an extra"

    workdir = tmp_path / "elsewhere"  # not the repository: nothing found by accident
    workdir.mkdir()
    wiki = tmp_path / "wiki"
    shutil.copytree(FIXTURE_WIKI, wiki)
    db = f"sqlite:///{tmp_path / 'index.db'}"
    cli = str(bin_dir / "kernelwiki")

    indexed = _run([cli, "index", "--wiki", str(wiki), "--db", db], workdir, CLI_TIMEOUT_S)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    assert re.search(r"indexed .*: [1-9]\d* added", " ".join(indexed.stdout.split())), indexed.stdout

    found = _run([cli, "search", "mbarrier", "--wiki", str(wiki), "--db", db, "--json"], workdir, CLI_TIMEOUT_S)
    assert found.returncode == 0, found.stdout + found.stderr
    assert json.loads(found.stdout)["results"], found.stdout

    port = _free_port()
    server = subprocess.Popen(
        [cli, "serve", "--wiki", str(wiki), "--db", db, "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + SERVE_START_TIMEOUT_S
        health = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as answer:
                    health = json.loads(answer.read())
                    break
            except OSError:
                time.sleep(0.2)
        assert health is not None, f"serve did not answer on port {port}: exit {server.poll()}"
        assert health["pages"] > 0
    finally:
        server.terminate()
        try:
            output, _ = server.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
    assert "Traceback" not in output, output
