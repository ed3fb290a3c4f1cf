"""Reading compiler output: the first error, what kind of failure it is, and where it is on the page.

Messages come from four tools with four formats: the CUDA front end
(`snippet(12): error: …`), the host compiler (`snippet:12:5: error: …`), ptxas
(`ptxas snippet.ptx, line 40; error : …`, a PTX line that is mapped back to
the source through the PTX `.loc` entries) and Python (`File "snippet.py",
line 3`). Locations are kept relative to a segment of the translation unit
(`snippet`, `chain-1`, …) so that a cached result still points at the right
page line after the block moves on its page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from snippets.build import TranslationUnit

UNDEFINED_IDENTIFIER = "undefined identifier"
UNSUPPORTED_ON_TARGET = "not supported on this target"
PTX_SYNTAX_ERROR = "PTX syntax error"
HOST_COMPILE_ERROR = "host compile error"
DEVICE_COMPILE_ERROR = "compile error"
MISSING_HEADER = "missing header"
LINK_ERROR = "link error"
PYTHON_SYNTAX_ERROR = "Python syntax error"
COMPILER_CRASH = "compiler crashed"
TIMEOUT = "timeout"
NOT_ASSEMBLED = "not assembled"

_FRONTEND = re.compile(
    r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error)(?: #[\w-]+)?: (?P<msg>.+)$", re.M
)
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.+)$", re.M)
_PTXAS = re.compile(r"^ptxas (?P<file>.+?), line (?P<line>\d+); (?:fatal )?error\s*: (?P<msg>.+)$", re.M)
_PTXAS_FATAL = re.compile(r"^ptxas fatal\s*: (?P<msg>.+)$", re.M)
_NVLINK = re.compile(r"^nvlink (?:fatal|error)\s*: (?P<msg>.+)$", re.M)
_LD = re.compile(r"^.*(?:undefined reference to .+|collect2: error: .+|ld returned \d+ exit status)$", re.M)
_NVCC_FATAL = re.compile(r"^nvcc (?:fatal|error)\s*: (?P<msg>.+)$", re.M)
_PY_FILE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.M)
_PY_ERROR = re.compile(r"^(?P<type>\w*Error): (?P<msg>.+)$", re.M)

_UNSUPPORTED = re.compile(
    r"not supported on \.target|requires \.target|not supported for \.target|is not supported on|"
    r"requires (?:a )?(?:minimum|sm_\d+)|only supported on|not supported on target|unsupported (?:on|for) (?:the )?target|"
    r"PTX ISA version .* does not support|does not support \.target|is only available (?:on|for)|cannot be compiled to",
    re.I,
)
_UNDEFINED = re.compile(
    r'identifier "[^"]+" is undefined|is undefined|has no member|is not a member of|was not declared in this scope|'
    r'undeclared identifier|name followed by "::" must be a class or namespace name|is not a template|'
    r"unknown type name|does not name a type|not declared",
    re.I,
)


_PTXAS_NOTE = re.compile(r"^ptxas (?:info|warning)\s*: (?P<msg>(?:\((?P<code>C\d+)\) )?.+?)\s*$", re.M)
_CHANGES_MEANING = re.compile(r"\bignored\b|performance loss|\bserialized\b", re.I)


RDC_BUILD = "relocatable -rdc=true build"
"""Which build a cuda block's compile record (and its output) is about."""
PROGRAM_BUILD = "whole-program build that ran"
"""The build of a `run` block's executable."""


def meaning_warnings(output: str, build: str = "") -> list[str]:
    """ptxas messages that change what a passing build means: an instruction ignored, or performance lost.

    e.g. `ptxas (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility across
    compilation units.` from a `-rdc=true` build: the code assembled, but the instruction has no effect there.
    Each message once, in order, followed by `[build]` when given.
    """
    found = [
        f"ptxas {m.group('msg')}" + (f" [{build}]" if build else "")
        for m in _PTXAS_NOTE.finditer(output)
        if _CHANGES_MEANING.search(m.group("msg"))
    ]
    return list(dict.fromkeys(found))


def record_warnings(step: str, lang: str, output: str) -> list[str]:
    """The warnings of a compile record written before records carried them (read from its output)."""
    if step != "compile":
        return []
    return meaning_warnings(output, RDC_BUILD if lang == "cuda" else "")


@dataclass
class Diagnosis:
    """The first error of a failed build."""

    kind: str  # one of the constants above
    message: str  # the tool's message, without its file/line prefix
    segment: str | None = None  # translation-unit segment holding the error: snippet, chain-N, prelude
    segment_line: int | None = None  # 1-based line inside that segment


def _segment_name(file: str) -> str:
    return file.replace("\\", "/").rsplit("/", 1)[-1]


def ptx_loc(ptx: str, ptx_line: int) -> tuple[str, int] | None:
    """Source (file basename, line) of a PTX line, from the nearest `.loc` at or above it."""
    lines = ptx.split("\n")
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, flags=re.M))
    for i in range(min(ptx_line, len(lines)) - 1, -1, -1):
        m = re.match(r"\s*\.loc\s+(\d+)\s+(\d+)\s+\d+", lines[i])
        if m and m.group(1) in files:
            return _segment_name(files[m.group(1)]), int(m.group(2))
    return None


def _kind_of_frontend(message: str) -> str:
    if _UNDEFINED.search(message):
        return UNDEFINED_IDENTIFIER
    if "cannot open source file" in message or "No such file or directory" in message:
        return MISSING_HEADER
    if _UNSUPPORTED.search(message):
        return UNSUPPORTED_ON_TARGET
    return DEVICE_COMPILE_ERROR


def _first(*matches: re.Match[str] | None) -> re.Match[str] | None:
    present = [m for m in matches if m is not None]
    return min(present, key=lambda m: m.start()) if present else None


def diagnose_build(output: str, lang: str, tu: TranslationUnit | None = None, ptx: str | None = None) -> Diagnosis:
    """Classify the first error in the output of a failed nvcc/ptxas/python build."""
    if lang == "python":
        err = _PY_ERROR.search(output)
        loc = None
        for frame in _PY_FILE.finditer(output):
            if frame.group("file").endswith("snippet.py"):
                loc = frame
        message = f"{err.group('type')}: {err.group('msg')}" if err else (output.strip().splitlines() or ["failed"])[-1]
        syntax = err is not None and err.group("type") in ("SyntaxError", "IndentationError", "TabError")
        kind = PYTHON_SYNTAX_ERROR if syntax else DEVICE_COMPILE_ERROR
        where = tu.locate(int(loc.group("line"))) if (loc and tu) else None
        return Diagnosis(kind, message, *(where or (None, None)))

    front = _FRONTEND.search(output)
    gcc = _GCC.search(output)
    ptxas = _PTXAS.search(output)
    first = _first(front, gcc, ptxas)
    if first is not None and first is front:
        msg = front.group("msg").strip()
        return Diagnosis(_kind_of_frontend(msg), msg, _segment_name(front.group("file")), int(front.group("line")))
    if first is not None and first is gcc:
        msg = gcc.group("msg").strip()
        kind = _kind_of_frontend(msg)
        if kind == DEVICE_COMPILE_ERROR:
            kind = HOST_COMPILE_ERROR
        return Diagnosis(kind, msg, _segment_name(gcc.group("file")), int(gcc.group("line")))
    if first is not None and first is ptxas:
        msg = ptxas.group("msg").strip()
        # The first ptxas line often names the modifier; prefer the line of the same PTX line that names the instruction.
        same_line = [m for m in _PTXAS.finditer(output) if m.group("line") == ptxas.group("line")]
        unsupported_all = [m for m in same_line if _UNSUPPORTED.search(m.group("msg"))]
        unsupported = next((m for m in unsupported_all if m.group("msg").startswith("Instruction")), None)
        unsupported = unsupported or (unsupported_all[0] if unsupported_all else None)
        if unsupported is not None:
            kind, msg = UNSUPPORTED_ON_TARGET, unsupported.group("msg").strip()
        else:
            named = next((m for m in same_line if "Not a name of any known instruction" in m.group("msg")), None)
            msg = (named or ptxas).group("msg").strip()
            kind = PTX_SYNTAX_ERROR
        ptx_line = int(ptxas.group("line"))
        where = None
        if lang == "ptx" and tu is not None:
            where = tu.locate(ptx_line)
        elif ptx:
            where = ptx_loc(ptx, ptx_line)
        return Diagnosis(kind, msg, *(where or (None, None)))
    for pattern, kind in ((_NVLINK, LINK_ERROR), (_PTXAS_FATAL, PTX_SYNTAX_ERROR), (_NVCC_FATAL, DEVICE_COMPILE_ERROR)):
        m = pattern.search(output)
        if m:
            msg = m.group("msg").strip()
            if kind == PTX_SYNTAX_ERROR and _UNSUPPORTED.search(msg):
                kind = UNSUPPORTED_ON_TARGET
            if lang == "ptx" and tu is not None and ".target" in msg:
                target_line = next(
                    (i for i, ln in enumerate(tu.text.split("\n"), start=1) if ln.strip().startswith(".target")), None
                )
                where = tu.locate(target_line) if target_line else None
                return Diagnosis(kind, msg, *(where or (None, None)))
            return Diagnosis(kind, msg)
    m = _LD.search(output)
    if m:
        return Diagnosis(LINK_ERROR, m.group(0).strip())
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    return Diagnosis(DEVICE_COMPILE_ERROR, lines[0].strip() if lines else "the compiler failed without a message")


def page_line(
    snippet_first_line: int,
    chain_first_lines: list[int],
    segment: str | None,
    line: int | None,
    segment_lengths: dict[str, int] | None = None,
) -> int | None:
    """Page file line of (segment, line): `snippet` is the block itself, `chain-K` its K-th chained block."""
    if segment is None or line is None:
        return None
    if segment_lengths and segment in segment_lengths:
        line = max(1, min(line, max(segment_lengths[segment], 1)))
    if segment == "snippet":
        return snippet_first_line + line - 1
    m = re.fullmatch(r"chain-(\d+)", segment)
    if m and 1 <= int(m.group(1)) <= len(chain_first_lines):
        return chain_first_lines[int(m.group(1)) - 1] + line - 1
    return None
