"""What a code block that declares nothing is: a program, a complete translation unit, or a fragment.

A page written without kernelwiki's fence attributes (a KernelWiki repository's pages) still has
blocks worth verifying, and blocks that cannot be: an excerpt that uses `ptr` without declaring it
would be reported `fail` if compiled, which says the page is wrong when it only quotes. A block with
no attributes is therefore classified before it is built:

* **program**: it defines `main` (C/C++/CUDA) or a `__main__` entry (Python): built, and run where a
  GPU of its target is;
* **unit**: a complete translation unit (declarations and definitions only): compiled;
* **fragment**: statements outside any function, placeholder `...`, device built-ins or inline
  assembly at file scope, or a library namespace (`cutlass::`) with no `#include`: never built, its
  status is `unverified` with the reason `FRAGMENT_REASON`.

Python that is not a program is only byte-compiled: its status is `syntax-ok`, never `pass`
(runner/status.py). `kernelwiki adopt` prints this classification per block with the attributes that
would make the block verifiable. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FRAGMENT_REASON = "fragment: not a complete program"
"""The reason recorded for a block classified as a fragment."""

PROGRAM, UNIT, FRAGMENT, PTX_MODULE, PTX_FRAGMENT, SCRIPT = "program", "unit", "fragment", "module", "ptx-fragment", "script"

_KNOWN_NAMESPACES = frozenset({"std", "cuda", "nvcuda", "cooperative_groups", "cg", "wmma"})
"""Namespaces the prelude's headers provide (anything else needs a header the block must include)."""

_CONTROL = frozenset(
    {"if", "for", "while", "switch", "return", "do", "else", "case", "break", "continue", "goto", "co_await", "co_return"}
)
_DECL_WORDS = frozenset(
    {"static_assert", "template", "using", "typedef", "namespace", "extern", "struct", "class", "union", "enum", "#"}
)
_PLACEHOLDER = re.compile(r"(^|[(<{\[,=]\s*)\.\.\.(\s*[)>}\],;]|\s*$)", re.MULTILINE)
_FILE_SCOPE_DEVICE = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim|__syncthreads|__syncwarp)\b|\basm\s*(volatile\s*)?\(")
_CALL_OR_ASSIGN = re.compile(r"^\s*[A-Za-z_][\w.]*(?:->\w+)*\s*(\(|=(?!=)|\+=|-=|\*=|/=|\[|\+\+|--)")
_NAMESPACE_USE = re.compile(r"\b([A-Za-z_]\w*)::")
_NAMESPACE_DECL = re.compile(r"\bnamespace\s+([A-Za-z_]\w*)")
_TYPE_DECL = re.compile(r"\b(?:struct|class|enum|union)\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Classification:
    """What a block is, why, and the fence attributes that would make it verifiable."""

    kind: str  # program | unit | fragment | module | ptx-fragment | script
    reason: str  # why, in a sentence
    suggestion: str  # attributes to add to the fence (empty when the block verifies as it is)


def _strip_comments_and_strings(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), source, flags=re.DOTALL)
    source = re.sub(r"//[^\n]*", "", source)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', source)


def _file_scope_lines(code: str) -> list[str]:
    """Statements at brace depth 0 (one string per statement, ended by ';' at depth 0)."""
    out: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in code:
        if ch == "{":
            depth += 1
            if depth == 1:
                current.append("{}")
            continue
        if ch == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                out.append("".join(current))
                current = []
            continue
        if depth == 0:
            if ch == ";":
                out.append("".join(current))
                current = []
            else:
                current.append(ch)
    if "".join(current).strip():
        out.append("".join(current))
    return [s.strip() for s in out if s.strip()]


def c_fragment_reason(source: str) -> str | None:
    """Why a C/C++/CUDA block is a fragment, or None when it reads as a complete translation unit."""
    code = _strip_comments_and_strings(source)
    without_pp = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith("#"))
    if _PLACEHOLDER.search(without_pp):
        return "it holds a '...' placeholder"
    includes = [line for line in code.split("\n") if line.lstrip().startswith("#include")]
    declared = set(_NAMESPACE_DECL.findall(code)) | set(_TYPE_DECL.findall(code))
    foreign = sorted({ns for ns in _NAMESPACE_USE.findall(without_pp) if ns not in _KNOWN_NAMESPACES and ns not in declared})
    if foreign and not includes:
        return f"it uses {foreign[0]}:: without including a header that declares it"
    for statement in _file_scope_lines(without_pp):
        head = statement.split()[0] if statement.split() else ""
        if head in _DECL_WORDS or head.startswith("#"):
            continue
        if statement.endswith("{}"):
            continue  # a function, struct or namespace definition
        if head in _CONTROL:
            return f"it has a '{head}' statement outside any function"
        if _FILE_SCOPE_DEVICE.search(statement):
            return "it uses thread indices, barriers or inline assembly outside any function"
        if _CALL_OR_ASSIGN.match(statement):
            return f"it has a statement outside any function: {statement.splitlines()[0][:60]}"
    return None


def classify(lang: str, source: str, defines_main: bool) -> Classification:
    """Classify a block that declares no attributes (see the module docstring)."""
    if lang in ("cuda", "cpp"):
        if defines_main:
            return Classification(PROGRAM, "it defines main()", 'arch=sm_90a output="…" (what it prints when its check passed)')
        reason = c_fragment_reason(source)
        if reason is not None:
            return Classification(FRAGMENT, reason, "sketch (or complete it, with hidden //! lines for what it leaves out)")
        return Classification(UNIT, "a complete translation unit without main()", "compile")
    if lang == "ptx":
        if re.search(r"^\s*\.version\b", source, re.MULTILINE):
            return Classification(PTX_MODULE, "a complete PTX module (.version)", "compile")
        return Classification(PTX_FRAGMENT, "PTX instructions without a module around them", "sketch")
    if defines_main:
        return Classification(
            PROGRAM, "it defines main() or a __main__ entry", 'arch=sm_90a output="…" (it must check its result)'
        )
    return Classification(
        SCRIPT,
        "Python without an entry point: only its syntax is checked",
        "sketch for pseudocode; or add a __main__ entry that checks its result, with arch= and output=",
    )
