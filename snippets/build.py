"""Turning a snippet into the one source file that is compiled: prelude, chained blocks, the block.

For `cuda` blocks this is also where *every device function is made to reach
ptxas*. nvcc drops `__device__` functions that nothing calls before they are
turned into PTX, so invalid inline PTX in an unused helper would never be
assembled. After the prelude the translation unit redefines

    #define __device__ __location__(device) __attribute__((used))

so that every function, variable and lambda the snippet declares `__device__`
(including `static`, `inline`, `__forceinline__` and anonymous-namespace ones)
is emitted into the PTX; the runner then compiles with `-rdc=true`, under which
ptxas code-generates every emitted function, not only those reachable from a
kernel. `#include` lines inside the snippet are wrapped so that headers keep
the original `__device__` (their thousands of inline helpers are not forced).
Templates that are never instantiated produce no code at all; the runner's
inline-asm coverage check (runner/coverage.py) reports those as not verifiable.

Each segment starts with a `#line 1 "NAME"` directive, so compiler messages and
PTX `.loc` entries name the segment (`snippet`, `chain-1`, `prelude`) and the
line inside it; `TranslationUnit.locate` does the same for tools without
`#line` support, and runner/diagnostics.py maps (segment, line) back to the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from snippets.harness import companions
from snippets.snippet import Snippet

PRELUDE = """\
#include <cuda_runtime.h>
#include <cuda.h>           // driver API types (CUtensorMap, …); not linked
#include <cudaTypedefs.h>   // PFN_cuTensorMapEncodeTiled and friends
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
"""
"""The documented prelude of every `cuda` and `cpp` block (docs/snippets.md)."""

FORCE_DEVICE_FUNCTIONS = """\
// kernelwiki: emit every __device__ entity of the snippet so that ptxas sees it (snippets/build.py)
#undef __device__
#define __device__ __location__(device) __attribute__((used))
"""
"""Lines placed after the prelude of a `cuda` translation unit."""

_INCLUDE_OPEN = (
    '#pragma push_macro("__device__")',
    "#undef __device__",
    "#define __device__ __location__(device)",
)
_INCLUDE_CLOSE = '#pragma pop_macro("__device__")'

BUILD_RECIPE = "kernelwiki-build-2"
"""Version of the way a snippet is turned into a build; part of every content hash. Bump on change."""

SEGMENT_PRELUDE = "prelude"
SEGMENT_SNIPPET = "snippet"

FILE_NAMES = {"cuda": "snippet.cu", "cpp": "snippet.cpp", "ptx": "snippet.ptx", "python": "snippet.py"}
"""Name of the translation unit written into the build folder, by language."""

_INCLUDE_LINE = re.compile(r"^\s*#\s*include\b")


@dataclass
class TranslationUnit:
    """The file that is compiled, and which segment line each of its lines comes from."""

    text: str  # the whole source
    filename: str  # snippet.cu / snippet.cpp / snippet.ptx / snippet.py
    tu_lines: list[tuple[str, int]] = field(default_factory=list)  # per TU line: (segment, line in segment or 0)
    companions: dict[str, str] = field(default_factory=dict)  # files written beside it: the measuring harness

    def write(self, folder: Path) -> None:
        """Write the unit and its companion files into `folder`."""
        (folder / self.filename).write_text(self.text, encoding="utf-8")
        for name, text in self.companions.items():
            (folder / name).write_text(text, encoding="utf-8")

    def locate(self, tu_line: int) -> tuple[str, int] | None:
        """(segment, line in segment) of a 1-based translation-unit line; None for generated lines."""
        if 1 <= tu_line <= len(self.tu_lines):
            seg, line = self.tu_lines[tu_line - 1]
            return (seg, line) if line else None
        return None


class _Writer:
    """Accumulates translation-unit lines and remembers where each came from."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.origin: list[tuple[str, int]] = []

    def generated(self, text: str) -> None:
        for line in text.splitlines():
            self.lines.append(line)
            self.origin.append(("", 0))

    def source(self, segment: str, number: int, line: str) -> None:
        self.lines.append(line)
        self.origin.append((segment, number))


def _block_comment_states(lines: list[str]) -> list[bool]:
    """For each line: does it start inside a /* … */ comment? (strings are ignored: good enough here)."""
    states: list[bool] = []
    inside = False
    for line in lines:
        states.append(inside)
        i = 0
        while i < len(line):
            if inside:
                end = line.find("*/", i)
                if end < 0:
                    break
                inside, i = False, end + 2
            else:
                start_line = line.find("//", i)
                start_block = line.find("/*", i)
                if start_block < 0 or (0 <= start_line < start_block):
                    break
                inside, i = True, start_block + 2
    return states


def _add_c_segment(w: _Writer, name: str, source: str, wrap_includes: bool) -> None:
    """Append a C/C++/CUDA segment with a #line directive; wrap its #include lines when asked."""
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    w.generated(f'#line 1 "{name}"')
    in_comment = _block_comment_states(lines)
    for number, line in enumerate(lines, start=1):
        if wrap_includes and not in_comment[number - 1] and _INCLUDE_LINE.match(line):
            for extra in _INCLUDE_OPEN:
                w.generated(extra)
            w.generated(f'#line {number} "{name}"')
            w.source(name, number, line)
            w.generated(_INCLUDE_CLOSE)
            w.generated(f'#line {number + 1} "{name}"')
        else:
            w.source(name, number, line)


def _add_plain_segment(w: _Writer, name: str, source: str) -> None:
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        w.source(name, number, line)


def chain_segment_name(position: int) -> str:
    """Segment name of the position-th (1-based) chained block."""
    return f"chain-{position}"


def build_translation_unit(snippet: Snippet) -> TranslationUnit:
    """The single file compiled for `snippet`: prelude (cuda/cpp), chained blocks, then the block."""
    w = _Writer()
    lang = snippet.lang
    parts = [(chain_segment_name(i), part.source) for i, part in enumerate(snippet.chain, start=1)]
    parts.append((SEGMENT_SNIPPET, snippet.full_source))
    if lang in ("cuda", "cpp"):
        w.generated(f'#line 1 "{SEGMENT_PRELUDE}"')
        for number, line in enumerate(PRELUDE.rstrip("\n").split("\n"), start=1):
            w.source(SEGMENT_PRELUDE, number, line)
        if lang == "cuda":
            w.generated(FORCE_DEVICE_FUNCTIONS)
        for name, source in parts:
            _add_c_segment(w, name, source, wrap_includes=lang == "cuda")
    else:
        for name, source in parts:
            _add_plain_segment(w, name, source)
    text = "\n".join(w.lines) + "\n"
    extra = companions(lang, [source for _, source in parts])
    return TranslationUnit(text=text, filename=FILE_NAMES[lang], tu_lines=w.origin, companions=extra)


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\\n])*"')
_C_MAIN = re.compile(r"\b(?:int|auto)\s+main\s*\(")
_PY_MAIN = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:|^def\s+main\s*\(""", re.M)


def defines_main(lang: str, source: str) -> bool:
    """Does the block define a program entry point (`main` in C++, `__main__`/`main()` in Python)?"""
    if lang in ("cuda", "cpp"):
        code = _STRINGS.sub('""', _COMMENTS.sub(" ", source))
        return bool(_C_MAIN.search(code))
    if lang == "python":
        return bool(_PY_MAIN.search(source))
    return False


_PTX_VERSION = re.compile(r"^\s*\.version\s+\d+\.\d+", re.M)


def is_complete_ptx_module(source: str) -> bool:
    """A PTX block is a complete module when it has a `.version` directive."""
    return bool(_PTX_VERSION.search(_COMMENTS.sub(" ", source)))
