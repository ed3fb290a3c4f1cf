"""Did every inline-PTX statement of a snippet really reach ptxas? And the SASS/PTX regex checks.

Forcing every `__device__` function into the PTX (snippets/build.py) covers
ordinary functions, but a template that is never instantiated, an `if constexpr`
branch not taken, or code the optimizer proved dead produce no PTX at all. So
after a successful build the runner compares the `asm(…)` statements of the
block, read from nvcc's preprocessed device source for this very target (so
`#if __CUDA_ARCH__` branches for other targets are correctly left out), with the
inline-asm regions nvcc wrote into the PTX (`// begin inline asm` … `// end
inline asm`). An asm statement whose instructions are not there was never
assembled: the block is reported `unverified`, never `pass`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from snippets.attributes import InfoStringError, compile_check

_LINE_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"')
_TOKEN = re.compile(
    r"""(?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")|(?P<chr>'(?:\\.|[^'\\\n])*')|(?P<ident>[A-Za-z_]\w*)|(?P<ws>\s+)|(?P<other>.)""",
    re.S,
)
_ASM_WORDS = {"asm", "__asm__", "__asm"}
_ASM_QUALIFIERS = {"volatile", "__volatile__", "__volatile", "inline", "goto"}
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "?": "?",
}


@dataclass
class AsmStatement:
    """One `asm(…)` statement of the block."""

    line: int  # line inside the segment (the block), 1-based
    template: str  # the decoded template string
    mnemonics: list[str]  # PTX instructions it contains, e.g. ["setp.eq.u32", "tcgen05.alloc.cta_group::1…"]


def _decode_literal(literal: str) -> str:
    body = literal[literal.index('"') + 1 : -1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                m = re.match(r"[0-9A-Fa-f]+", body[i + 2 :])
                if m:
                    out.append(chr(int(m.group(0), 16) & 0xFF))
                    i += 2 + len(m.group(0))
                    continue
            if nxt in "01234567":
                m = re.match(r"[0-7]{1,3}", body[i + 1 :])
                assert m is not None
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_LABEL = re.compile(r"^[A-Za-z_$%][\w$%=]*:(?!:)\s*")
_GUARD = re.compile(r"^@!?%?[\w$%]+\s*")
_MNEMONIC = re.compile(r"^[a-z][\w.:]*$")


def mnemonics(ptx_text: str) -> list[str]:
    """The instruction mnemonics in a piece of PTX (directives, labels, braces and guards skipped)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", ptx_text, flags=re.S)
    found: list[str] = []
    for stmt in re.split(r"[;{}\n]", text):
        s = stmt.strip()
        while True:
            stripped = _LABEL.sub("", s, count=1)
            if stripped == s:
                break
            s = stripped
        s = _GUARD.sub("", s, count=1).strip()
        if not s or s.startswith("."):
            continue
        word = s.split()[0].rstrip(",")
        if "%" in word or not _MNEMONIC.match(word):
            continue
        found.append(word)
    return found


def segment_source(preprocessed: str, segment: str) -> list[tuple[int, str]]:
    """(line in segment, text) of the lines of the preprocessed file that come from `segment`."""
    kept: list[tuple[int, str]] = []
    current_file: str | None = None
    current_line = 0
    for raw in preprocessed.split("\n"):
        m = _LINE_MARKER.match(raw)
        if m:
            current_line = int(m.group(1))
            current_file = m.group(2)
            continue
        if current_file is not None and (current_file == segment or current_file.endswith("/" + segment)):
            kept.append((current_line, raw))
        current_line += 1
    return kept


def asm_statements(preprocessed: str, segment: str) -> list[AsmStatement]:
    """Every `asm(…)` statement in `segment` of a preprocessed translation unit, with its template."""
    lines = segment_source(preprocessed, segment)
    if not lines:
        return []
    text_parts: list[str] = []
    line_at: list[tuple[int, int]] = []  # (offset, segment line)
    offset = 0
    for number, raw in lines:
        line_at.append((offset, number))
        text_parts.append(raw + "\n")
        offset += len(raw) + 1
    text = "".join(text_parts)
    tokens = [(m.lastgroup, m.group(0), m.start()) for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]

    def line_of(pos: int) -> int:
        number = line_at[0][1]
        for start, n in line_at:
            if start > pos:
                break
            number = n
        return number

    found: list[AsmStatement] = []
    i = 0
    while i < len(tokens):
        kind, value, pos = tokens[i]
        if kind == "ident" and value in _ASM_WORDS:
            j = i + 1
            while j < len(tokens) and tokens[j][0] == "ident" and tokens[j][1] in _ASM_QUALIFIERS:
                j += 1
            if j < len(tokens) and tokens[j][1] == "(":
                j += 1
                pieces: list[str] = []
                while j < len(tokens) and tokens[j][0] == "str":
                    pieces.append(_decode_literal(tokens[j][1]))
                    j += 1
                if pieces:
                    template = "".join(pieces)
                    found.append(AsmStatement(line_of(pos), template, mnemonics(template)))
                i = j
                continue
        i += 1
    return found


def ptx_inline_asm(ptx: str) -> str:
    """The text of every inline-asm region nvcc wrote into a PTX file, concatenated."""
    regions = re.findall(r"// begin inline asm\n(.*?)// end inline asm", ptx, flags=re.S)
    return "\n".join(regions)


def unassembled_asm(preprocessed: str, ptx: str, segment: str) -> list[AsmStatement]:
    """asm statements of `segment` whose instructions appear in no inline-asm region of the PTX."""
    emitted = set(mnemonics(ptx_inline_asm(ptx)))
    return [s for s in asm_statements(preprocessed, segment) if s.mnemonics and not set(s.mnemonics) <= emitted]


MATCH_SHOWN_CHARS = 120
"""How much of a match a check's detail shows (the text matched is compiler output read through the sandbox)."""


def regex_checks(checks: dict[str, list[str]], kind: str, text: str) -> list[dict[str, Any]]:
    """Apply `kind=` (must match) and `no_kind=` (must not match) patterns to `text` with RE2 (linear time; the
    same rule as the linter's, snippets.attributes.compile_check). A pattern RE2 refuses fails its check."""
    results: list[dict[str, Any]] = []
    for key, must_match in ((kind, True), (f"no_{kind}", False)):
        for pattern in checks.get(key, []):
            try:
                m = compile_check(pattern).search(text)
            except InfoStringError as exc:
                results.append({"kind": key, "pattern": pattern[:MATCH_SHOWN_CHARS], "ok": False, "detail": f"refused: {exc}"})
                continue
            detail = f"matched '{m.group(0)[:MATCH_SHOWN_CHARS]}'" if m else "no match"
            results.append({"kind": key, "pattern": pattern, "ok": bool(m) == must_match, "detail": detail})
    return results
