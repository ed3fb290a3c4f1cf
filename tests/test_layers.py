"""Imports point down the layers (snippets → runner → app) and no modules import each other in a circle.

Every import counts, the ones inside functions too: a lazy import still makes
the importing module depend on the imported one. Read with `ast`, so nothing
is imported to check it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("snippets", "runner", "app")
"""Lowest first: a package may import the ones before it, never the ones after it."""


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


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file, resolved to one of MODULES where it is one."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{MODULES[name].relative_to(ROOT)}:{line}: {name} imports {target}"
        for name, targets in _graph().items()
        for target, line in targets.items()
        if LAYERS.index(target.split(".")[0]) > LAYERS.index(name.split(".")[0])
    ]
    assert upward == [], "imports up the layers (snippets → runner → app):\n" + "\n".join(upward)


def test_the_lower_layers_import_no_web_or_database_stack() -> None:
    allowed = {"yaml", "markdown_it", "re2", "cupy", "rich", "snippets", "runner", "__future__"}  # re2: linear-time checks
    stdlib = set(__import__("sys").stdlib_module_names)
    foreign = sorted(
        {
            f"{path.relative_to(ROOT)}:{line}: {target}"
            for name, path in MODULES.items()
            if not name.startswith("app")
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
