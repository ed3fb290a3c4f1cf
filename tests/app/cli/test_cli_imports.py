"""`kernelwiki` imports only what the command it runs needs: tests and scripts start it many times, and the web
app (FastAPI, the routes, the templates: about 0.5 s of CPU) was imported by every `index`, `search` or `verify`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE_WIKI = Path(__file__).resolve().parents[2] / "fixtures" / "wiki"
WEB_STACK = ("fastapi", "starlette", "uvicorn", "jinja2", "app.main", "app.api", "app.web", "app.agents", "app.serve")
COMPILER = ("runner.verify", "runner.compile", "runner.batch", "runner.nvrtc")
# The real entry point (`kernelwiki` = app.cli.main:main) with the arguments given; then the modules it imported.
PROBE = (
    "import json, sys\n"
    "out, sys.argv = sys.argv[1], ['kernelwiki', *sys.argv[2:]]\n"
    "from app.cli.main import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "else:\n"
    "    code = 0\n"
    "open(out, 'w').write(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
)


def imported_by(tmp_path: Path, *argv: str) -> set[str]:
    """The modules `kernelwiki ARGV` imported, in a fresh interpreter; the command must succeed."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "KERNELWIKI_EVIDENCE": str(tmp_path / "evidence")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert found["code"] in (0, None), done.stdout + done.stderr
    return set(found["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_imports_neither_the_web_app_nor_the_compiler_driver(tmp_path: Path) -> None:
    modules = imported_by(tmp_path, "--help")
    assert "app.cli.main" in modules  # the probe ran the real command line
    assert loaded(modules, WEB_STACK + COMPILER + ("sqlalchemy", "tantivy")) == []


@pytest.mark.parametrize("command", [["index"], ["lint"]])
def test_index_and_lint_do_not_import_the_web_app(tmp_path: Path, command: list[str]) -> None:
    db = f"sqlite:///{tmp_path / 'index.db'}"
    modules = imported_by(tmp_path, *command, "--wiki", str(FIXTURE_WIKI), *(["--db", db] if command == ["index"] else []))
    if command == ["index"]:
        assert (tmp_path / "index.db").is_file()  # it did index
        assert "app.store" in modules
    assert loaded(modules, WEB_STACK) == []
