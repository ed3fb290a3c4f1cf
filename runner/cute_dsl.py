"""CuTe-DSL Python blocks checked against the released DSL (nvidia-cutlass-dsl, the optional extra `cute`).

Pages in the KernelWiki format carry Python CuTe-DSL code (`import cutlass.cute as cute`,
`tcgen05.MmaF16BF16Op(...)`), and older pages carry pseudo-DSL that no release has
(`from cute import *`, `make_tma_copy(SM100_TMA_LOAD_2D, …)`). Byte-compiling both says
`syntax-ok`; this module tells them apart by *name resolution*: every module a block imports
from the DSL and every attribute chain it reads from those modules (`tcgen05.CtaGroup.ONE`,
`cute.make_tiled_mma`) is looked up in the installed DSL.

* all names resolve: the block stays `syntax-ok`, its detail says the names resolve in
  nvidia-cutlass-dsl VERSION (names exist; the code was not run);
* a name does not resolve: `fail`, naming it ("nvidia-cutlass-dsl 4.8.1 has no module 'cute'").

The page's code is never executed here: it is parsed with `ast` in this process, and only the
DSL's own modules are imported, in a child process (`python -I`, a timeout, its own folder)
that reads the names to look up as JSON. Running construction code or `@cute.jit` compiles
(which work without a GPU, see docs/kernelwiki-format.md) would execute page code and needs
the runner's sandbox with the DSL inside it: not done here.
"""

from __future__ import annotations

import ast
import json
import subprocess
import tempfile
from dataclasses import dataclass

DSL_ROOTS = ("cutlass", "cute")
"""Top-level module names of DSL code (`cute` alone is the pseudo-DSL: the release has `cutlass.cute`)."""

LOOKUP_TIMEOUT_S = 120
"""Wall-clock limit of the child that imports the DSL (its first import takes seconds)."""

_LOOKUP = r"""
import importlib, json, sys
wanted = json.load(sys.stdin)
out = {"version": None, "missing": []}
try:
    import cutlass
    out["version"] = getattr(cutlass, "__version__", None)
except Exception as exc:
    print(json.dumps({"version": None, "missing": [], "absent": repr(exc)})); sys.exit(0)
for module, chain in wanted:
    try:
        obj = importlib.import_module(module)
    except Exception:
        out["missing"].append("module '%s'" % module); continue
    path = module
    for name in chain:
        if not hasattr(obj, name):
            out["missing"].append("'%s.%s'" % (path, name)); break
        obj = getattr(obj, name); path += "." + name
print(json.dumps(out))
"""


@dataclass
class DslCheck:
    """What the name lookup found."""

    version: str | None  # nvidia-cutlass-dsl version, None when the DSL is not installed
    missing: list[str]  # names that do not resolve, as messages
    names: int  # how many lookups were made


def uses_dsl(source: str) -> bool:
    """Whether a Python block imports the DSL (or the pseudo-DSL module `cute`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in DSL_ROOTS for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DSL_ROOTS:
            return True
    return False


def lookups(source: str) -> list[tuple[str, list[str]]]:
    """(module, attribute chain) pairs a block's DSL imports and reads, in order, without duplicates."""
    tree = ast.parse(source)
    alias: dict[str, str] = {}  # local name -> module path
    wanted: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in DSL_ROOTS:
                    wanted.append((a.name, []))
                    alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DSL_ROOTS:
            wanted.append((node.module, []))
            for a in node.names:
                if a.name != "*":
                    wanted.append((node.module, [a.name]))
                    alias[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
            chain: list[str] = []
            cur: ast.expr = node
            while isinstance(cur, ast.Attribute):
                chain.insert(0, cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id in alias:
                base = alias[cur.id]
                module, _, attr = base.rpartition(".")
                if base in {m for m, c in wanted if not c}:
                    wanted.append((base, chain))
                elif module:
                    wanted.append((module, [attr, *chain]))
    seen: set[tuple[str, tuple[str, ...]]] = set()
    out = []
    for module, chain in wanted:
        key = (module, tuple(chain))
        if key not in seen:
            seen.add(key)
            out.append((module, chain))
    return out


def check_names(source: str, python: str, env_arch: str = "sm_100a") -> DslCheck:
    """Look every DSL name of `source` up in the DSL installed for `python` (page code is parsed, never run)."""
    wanted = lookups(source)
    with tempfile.TemporaryDirectory(prefix="kw-cute-") as folder:
        try:
            res = subprocess.run(
                [python, "-I", "-c", _LOOKUP],
                input=json.dumps(wanted),
                capture_output=True,
                text=True,
                timeout=LOOKUP_TIMEOUT_S,
                cwd=folder,
                env={"PATH": "/usr/bin:/bin", "HOME": folder, "CUTE_DSL_ARCH": env_arch},
                check=False,
            )
        except subprocess.TimeoutExpired:
            return DslCheck(None, [], len(wanted))
    try:
        data = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return DslCheck(None, [], len(wanted))
    return DslCheck(data.get("version"), list(data.get("missing") or []), len(wanted))


def dsl_installed(python: str) -> str | None:
    """The nvidia-cutlass-dsl version `python` can import, or None."""
    return check_names("import cutlass\n", python).version


def judge(source: str, python: str) -> tuple[str, str] | None:
    """(status, detail) for a DSL block that passed its syntax check; None when it does not use the DSL or the DSL is absent."""
    if not uses_dsl(source):
        return None
    found = check_names(source, python)
    if found.version is None:
        return None
    if found.missing:
        return "fail", f"nvidia-cutlass-dsl {found.version} has no {found.missing[0]}" + (
            f" (and {len(found.missing) - 1} more missing name(s))" if len(found.missing) > 1 else ""
        )
    return "syntax-ok", f"syntax ok; its {found.names} CuTe-DSL names resolve in nvidia-cutlass-dsl {found.version} (not run)"
