"""Imports point down the layers (snippets → runner → app → bench → tests), down app/'s floors, and never in a circle.

Every import counts, the ones inside functions too (a lazy import still makes
the importing module depend on the imported one), and so does
`importlib.import_module("…")` or `__import__("…")` with a literal name. Read
with `ast`, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("snippets", "runner", "app", "bench", "tests")
"""Lowest first: a package may import the ones before it, never the ones after it (bench/ borrows nothing from tests/)."""

APP_FLOORS: tuple[tuple[str, ...], ...] = (
    # 0: imports nothing of app/: configuration, the error shape, the public models, process helpers, the LRU,
    # keyset pagination tokens
    ("app", "app.settings", "app.errors", "app.schemas", "app.lifeline", "app.shutdown", "app.cache", "app.keyset"),
    ("app.index",),  # 1: the SQL index: tables, migrations, reading pages, building the index
    ("app.search", "app.evidence"),  # 2: full-text search; evidence and snippet status (neither imports the other)
    # 3: services joining index and evidence: a page with its evidence, the health counts; a try unit and how it runs
    ("app.pages", "app.health", "app.tryrun.work"),
    ("app.store",),  # 4: the thin façade that wires the services over one database (no logic of its own)
    ("app.queue", "app.deps", "app.watch", "app.repair"),  # 5: job queue and worker; request dependencies; reindexing
    ("app.opening",),  # 6: the index opened (and changed snippets queued) for the CLI and the app factory, no web stack
    ("app.web",),  # 7: the HTML browser
    ("app.agents",),  # 8: Markdown and MCP for agents (borrows app.web.badges)
    ("app.api",),  # 9: the JSON API (borrows app.agents.budget for token-budgeted search)
    ("app.tryrun",),  # 10: try runs: tokens, quotas, stored results, their API, editor and MCP tools (issue 27)
    ("app.main",),  # 11: the app factory
    ("app.serve_workers",),  # 12: the workers of `serve --workers N`, forked from a supervisor that imported the app
    ("app.serve",),  # 13: `kernelwiki serve` (uvicorn, workers)
    ("app.cli",),  # 14: the `kernelwiki` command line
)
"""app/ from the ground up, read from the real import graph: a unit (a package, or a module at app/'s top) may import
the units on floors below its own, never one on its own floor or above. A new module of app/ gets a floor here."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _dynamic(node: ast.Call) -> str | None:
    """The literal module name of `importlib.import_module("x")`, `import_module("x")` or `__import__("x")`, else None."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None


def _imports_in(source: str, name: str, is_package: bool, filename: str = "<source>") -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in `source`, resolved to one of MODULES where it is one."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield (full if full in MODULES else module), node.lineno
        elif isinstance(node, ast.Call) and (dynamic := _dynamic(node)) is not None:
            yield dynamic, node.lineno


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    return _imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", str(path))


def _owner(target: str) -> str | None:
    """The module of ours that an import refers to (`app.web.views.x` → `app.web.views`), or None."""
    while target:
        if target in MODULES:
            return target
        target = target.rpartition(".")[0]
    return None


def _graph() -> dict[str, dict[str, int]]:
    """module → {module it imports: first line}."""
    graph: dict[str, dict[str, int]] = {name: {} for name in MODULES}
    for name, path in MODULES.items():
        for target, line in _imports(name, path):
            owner = _owner(target)
            if owner is not None and owner != name:
                graph[name].setdefault(owner, line)
    return graph


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(graph[root])))
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _unit(module: str) -> str | None:
    """The unit of APP_FLOORS an app/ module belongs to (`app.index.db` → `app.index`), or None."""
    units = {u for floor in APP_FLOORS for u in floor}
    while module:
        if module in units:
            return module
        module = module.rpartition(".")[0]
    return None


def _floor(unit: str) -> int:
    return next(i for i, floor in enumerate(APP_FLOORS) if unit in floor)


def _not_down_the_floors(graph: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    """(module, imported module, line) for each import between app/ units that does not point to a lower floor."""
    found = []
    for name, targets in graph.items():
        unit = _unit(name)
        for target, line in targets.items():
            other = _unit(target)
            if unit is None or other is None or other == unit:
                continue
            if _floor(other) >= _floor(unit):
                found.append((name, target, line))
    return found


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{MODULES[name].relative_to(ROOT)}:{line}: {name} imports {target}"
        for name, targets in _graph().items()
        for target, line in targets.items()
        if LAYERS.index(target.split(".")[0]) > LAYERS.index(name.split(".")[0])
    ]
    assert upward == [], "imports up the layers (snippets → runner → app → bench → tests):\n" + "\n".join(upward)


def test_every_app_module_has_a_floor() -> None:
    homeless = sorted(name for name in MODULES if name.split(".")[0] == "app" and _unit(name) is None)
    assert homeless == [], "app/ modules on no floor of APP_FLOORS (give each one):\n" + "\n".join(homeless)


def test_app_imports_point_down_its_floors() -> None:
    wrong = [
        f"{MODULES[name].relative_to(ROOT)}:{line}: {name} (floor {_floor(_unit(name) or '')}) imports {target}"
        f" (floor {_floor(_unit(target) or '')})"
        for name, target, line in _not_down_the_floors(_graph())
    ]
    assert wrong == [], "app/ imports that do not point down its floors (APP_FLOORS):\n" + "\n".join(wrong)


SERVICE_USERS = ("app.api", "app.web", "app.agents")
"""Routes, views and MCP tools: they depend on the concern services (app/deps.py's `PagesDep`, `SearchDep`,
`EvidenceDep`, `HealthDep`), never on the `Store` that wires them (issue 22)."""


def _importing(graph: dict[str, dict[str, int]], packages: tuple[str, ...], target: str) -> list[str]:
    """`path:line: module` for each module under `packages` that imports `target`."""
    return [
        f"{MODULES[name].relative_to(ROOT)}:{targets[target]}: {name}"
        for name, targets in graph.items()
        if target in targets and any(name == p or name.startswith(p + ".") for p in packages)
    ]


def test_routes_views_and_agent_tools_never_import_the_store() -> None:
    found = _importing(_graph(), SERVICE_USERS, "app.store")
    assert found == [], "import app.store; depend on the services it wires (app/deps.py) instead:\n" + "\n".join(found)


def test_the_store_check_finds_a_route_that_imports_the_store() -> None:
    graph = {"app.api.pages": {"app.store": 7, "app.pages": 8}, "app.main": {"app.store": 3}, "app.apis": {"app.store": 1}}
    assert _importing(graph, SERVICE_USERS, "app.store") == ["app/api/pages.py:7: app.api.pages"]


def test_the_lower_layers_import_no_web_or_database_stack() -> None:
    allowed = {"yaml", "markdown_it", "re2", "cupy", "rich", "snippets", "runner", "__future__"}  # re2: linear-time checks
    stdlib = set(__import__("sys").stdlib_module_names)
    foreign = sorted(
        {
            f"{path.relative_to(ROOT)}:{line}: {target}"
            for name, path in MODULES.items()
            if name.split(".")[0] in ("snippets", "runner")
            for target, line in _imports(name, path)
            if target.split(".")[0] not in allowed | stdlib
        }
    )
    assert foreign == [], (
        "snippets/ and runner/ may use only the standard library, PyYAML, markdown-it-py, google-re2 (CuPy, rich optional):\n"
        + "\n".join(foreign)
    )


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = _graph()
    circles = _circles(graph)
    described = [
        " → ".join(c) + "  (" + "; ".join(f"{a} imports {b} at line {graph[a][b]}" for a in c for b in c if b in graph[a]) + ")"
        for c in circles
    ]
    assert circles == [], "modules that import each other in a circle:\n" + "\n".join(described)


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_floor_check_finds_an_import_up_or_sideways() -> None:
    graph = {
        "app.index.db": {"app.settings": 1, "app.index.models": 2},  # down, and inside its own unit: fine
        "app.search.engine": {"app.evidence.store": 3},  # sideways, on one floor
        "app.store": {"app.api.search": 4},  # up
    }
    assert _not_down_the_floors(graph) == [("app.search.engine", "app.evidence.store", 3), ("app.store", "app.api.search", 4)]


def test_dynamic_imports_with_a_literal_name_count() -> None:
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "importlib.import_module('app.store')\n"
        "import_module('app.api')\n"
        "__import__('app.web', fromlist=['x'])\n"
        "importlib.import_module(name)\n"  # not a literal: cannot be read, not counted
    )
    found = [(m, line) for m, line in _imports_in(source, "runner.report", False) if m.startswith("app")]
    assert found == [("app.store", 3), ("app.api", 4), ("app.web", 5)]
