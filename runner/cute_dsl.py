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

The name lookup never executes page code: the block is parsed with `ast` in this process, and
only the DSL's own modules are imported, in a child process (`python -I`, a timeout, its own
folder) that reads the names to look up as JSON.

When the names resolve, `sandbox_check` goes further, inside the runner's sandbox (the same
`run_process` as every compile: bubblewrap, seccomp, no network, COMPILE_LIMITS), once per
target with `CUTE_DSL_ARCH` set to it (`sm_90a`, `sm_100a`): the block runs as a module
(`__name__` is not `"__main__"`, so a `if __name__ == "__main__":` launch is not run), which
executes its construction code; then, when the block defines the compile entry point
`kw_compile()` (a function without arguments, the convention docs/kernelwiki-format.md
describes), it is called: it calls `cute.compile(...)` on its `@cute.jit` function with
`cutlass.cute.runtime.make_fake_tensor` arguments. No GPU is needed for either. The verdict
is the harness's exit status (like a program's), never parsed from the block's output.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

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


ENTRY = "kw_compile"
"""The block's compile entry point: a module-level function without arguments that calls `cute.compile(...)`."""

SANDBOX_TIMEOUT_S = 300
"""Wall-clock limit of one sandboxed run of a block (importing the DSL and compiling take 7-10 s on 2 cores)."""

_HARNESS = r"""
import runpy, sys
def last(exc):
    text = " ".join(str(exc).split())
    print("kw-cute: " + (type(exc).__name__ + ": " + text)[:400], file=sys.stderr, flush=True)
try:
    ns = runpy.run_path("block.py", run_name="kw_block")
except BaseException as exc:
    last(exc)
    excerpt = isinstance(exc, NameError) or "CALL_OUTSIDE_JIT" in str(exc)
    sys.exit(%(excerpt)d if excerpt else %(ran_failed)d)
entry = ns.get("%(entry)s")
if not callable(entry):
    sys.exit(%(ran)d)
try:
    entry()
except BaseException as exc:
    last(exc); sys.exit(%(compile_failed)d)
sys.exit(%(compiled)d)
"""
RAN, COMPILED, RAN_FAILED, COMPILE_FAILED, EXCERPT = 0, 3, 4, 5, 6
"""The harness's exit statuses: construction ran (no entry), compiled, construction failed, compile failed, and an
excerpt: the block uses a name it never defines (NameError) or calls what the DSL allows only while a @cute.jit
function compiles (CALL_OUTSIDE_JIT), so it is part of a larger program, like a C++ fragment."""


def dsl_arch(target: str) -> str:
    """A build target as CUTE_DSL_ARCH spells it: sm90a / sm_90a → sm_90a, sm100 → sm_100a."""
    rest = target.lower().removeprefix("sm").lstrip("_")
    return f"sm_{rest}a" if rest.isdigit() else f"sm_{rest}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""Terminal colour codes the DSL puts in its error messages."""


def _error_line(output: str) -> str:
    """The harness's line about the exception (colour codes removed), else the output's last line."""
    lines = [ln[len("kw-cute: ") :] for ln in output.splitlines() if ln.startswith("kw-cute: ")]
    return _ANSI.sub("", lines[-1] if lines else (output.strip().splitlines() or [""])[-1][:300])


def sandbox_check(source: str, python: str, target: str, isolation: str | None) -> tuple[str, str]:
    """(status, detail) of running a DSL block's construction code and its `kw_compile()` for `target`, in the sandbox."""
    from runner.sandbox import new_workdir, remove_workdir, run_process

    arch = dsl_arch(target)
    workdir = new_workdir("kw-cute-")
    try:
        Path(workdir, "block.py").write_text(source)
        harness = _HARNESS % {
            "entry": ENTRY,
            "ran": RAN,
            "compiled": COMPILED,
            "ran_failed": RAN_FAILED,
            "compile_failed": COMPILE_FAILED,
            "excerpt": EXCERPT,
        }
        Path(workdir, "harness.py").write_text(harness)
        res = run_process(
            [python, "-I", "harness.py"],
            workdir,
            SANDBOX_TIMEOUT_S,
            isolation=isolation,
            extra_env={"CUTE_DSL_ARCH": arch},
        )
    finally:
        remove_workdir(workdir)
    where = f"in the sandbox with CUTE_DSL_ARCH={arch}"
    if res.error:
        return "error", f"could not run the block {where}: {res.error}"
    if res.timed_out:
        return "timeout", f"the block did not finish {where} within {SANDBOX_TIMEOUT_S} s"
    if res.exit_code == COMPILED:
        return "pass", f"construction code ran and {ENTRY}() compiled {where} (no GPU: not run)"
    if res.exit_code == RAN:
        return "syntax-ok", f"construction code ran {where}; no {ENTRY}() entry point, so nothing was compiled (not run)"
    if res.exit_code == COMPILE_FAILED:
        return "fail", f"{ENTRY}() failed {where}: {_error_line(res.output)}"
    if res.exit_code == EXCERPT:
        return "unverified", f"fragment: not a complete program ({_error_line(res.output)}; {where})"
    if res.exit_code == RAN_FAILED:
        return "fail", f"construction code failed {where}: {_error_line(res.output)}"
    return "fail", f"the block stopped {where} with exit status {res.exit_code}: {_error_line(res.output)}"
