"""SASS and PTX as kept artifacts: normalised so that two listings diff only where the code differs.

What nvdisasm prints (`nvdisasm --print-line-info --print-code snippet.cubin`) carries noise that
changes between two builds of the same code: instruction addresses (`/*0040*/`), encodings,
label numbers (`.L_x_17`), the numbering of registers the allocator picked, unique-name
suffixes of shared variables (`__29`), the padding NOPs after the last branch. A normalised
listing drops or renumbers all of those and keeps what a reader compares: per function, the
instructions in order, each under the source line it came from.

The normalised form is plain text, one item a line, and is what the artifact store keeps:

    .function _Z4axpyfPKfPfi
    .line snippet 3
        S2R R0, SR_TID.X ;
    .L0:
        @P0 EXIT ;

`.line SEGMENT N` names the translation-unit segment (`snippet`, `chain-1`, `prelude`,
snippets/build.py) and the line in it, which runner/diagnostics.py maps back to the page.
Registers are renumbered per function in order of first use, separately per register file
(R, UR, P, UP, B); RZ, URZ, PT, UPT and special registers (SR_…) stay as they are. Labels become
`.L0`, `.L1`, … in order of first appearance.

PTX is normalised more lightly (it is already stable): the header comments naming the compiler
build, `.file` paths and `.loc` directives are dropped; `.loc` becomes a `// .line SEGMENT N`
comment where the line changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LISTING_BYTES = 2 * 1024 * 1024
"""A normalised listing is cut (and marked) beyond this size; the per-snippet cap is in runner/artifacts.py."""

_ADDR = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*")
_ENCODING = re.compile(r"/\*\s*0x[0-9a-fA-F]+\s*\*/")
_LINE_INFO = re.compile(r'^\s*//## File "([^"]*)", line (\d+)')
_FUNC_HEADER = re.compile(r"^(?://-+ \.text\.|\s*Function : )(\S+)")
_LABEL_DEF = re.compile(r"^\s*(\.L_x_\d+|\.L_\w+):\s*$")
_LABEL = re.compile(r"\.L_x_\d+")
_UNIQUE_SUFFIX = re.compile(r"(\$?_{1,2}\w+?)__\d+\b")
_REG = re.compile(r"\b(UR|UP|R|P|B)(\d+)\b")
_OPCODE = re.compile(r"^(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")


@dataclass
class Instruction:
    """One SASS instruction of a normalised listing."""

    text: str  # normalised instruction, e.g. "@P0 BRA .L1 ;"
    opcode: str  # the mnemonic without modifiers, e.g. "HGMMA"
    full_opcode: str  # with modifiers, e.g. "HGMMA.64x128x16.F32.BF16"
    segment: str  # translation-unit segment of its source line ("" when unknown)
    line: int  # line in that segment (0 when unknown)


@dataclass
class Function:
    """A function's instructions, in order, and its labels."""

    name: str  # mangled name
    instructions: list[Instruction] = field(default_factory=list)  # in program order
    items: list[tuple[str, str]] = field(default_factory=list)  # ("line", "seg N") | ("label", ".L0") | ("insn", text)


def _source_segment(path: str) -> str:
    """The segment a `//## File` names: `#line 1 "snippet"` makes it "snippet"; a header keeps its base name."""
    return path.rsplit("/", 1)[-1]


class _Renamer:
    """Consistent renumbering within one function: each register file and the labels separately."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[str, str]] = {}

    def name(self, kind: str, old: str) -> str:
        table = self.maps.setdefault(kind, {})
        if old not in table:
            table[old] = f"{kind}{len(table)}" if kind != "L" else f".L{len(table)}"
        return table[old]

    def registers(self, text: str) -> str:
        return _REG.sub(lambda m: self.name(m.group(1), m.group(0)), text)

    def labels(self, text: str) -> str:
        return _LABEL.sub(lambda m: self.name("L", m.group(0)), text)


def normalize_sass(raw: str) -> str:
    """nvdisasm (or cuobjdump -sass) output → the normalised listing described above."""
    out: list[str] = []
    renamer = _Renamer()
    pending_line: str | None = None
    last_line: str | None = None
    in_code = False
    body: list[str] = []
    seen: set[str] = set()  # cuobjdump prints an executable's cubins one after another: each function once

    def flush() -> None:
        # Trailing padding after the final branch-to-self is not code anyone wrote.
        while body and (body[-1].strip() == "NOP ;" or body[-1].endswith(":") or body[-1].startswith(".line ")):
            body.pop()
        if len(body) >= 2 and body[-2].endswith(":") and body[-1].strip() == f"BRA {body[-2][:-1]} ;":
            del body[-2:]  # nvdisasm: `.L_x_3: BRA .L_x_3` after the last EXIT
        if body and re.fullmatch(r"\s*BRA 0x[0-9a-f]+ ;", body[-1]):
            body.pop()  # cuobjdump: the same branch-to-self, by address
        while body and (body[-1].endswith(":") or body[-1].startswith(".line ")):
            body.pop()
        out.extend(body)
        body.clear()

    for line in raw.splitlines():
        header = _FUNC_HEADER.match(line)
        if header:
            flush()
            renamer = _Renamer()
            name = _UNIQUE_SUFFIX.sub(r"\1", header.group(1))
            in_code, pending_line, last_line = name not in seen, None, None
            if in_code:
                out.append(f".function {name}")
                seen.add(name)
            continue
        if line.startswith("//---") or line.strip().startswith("....") or line.startswith("Fatbin "):
            flush()
            in_code = False
            continue
        if not in_code:
            continue
        info = _LINE_INFO.match(line)
        if info:
            pending_line = f".line {_source_segment(info.group(1))} {info.group(2)}"
            continue
        label = _LABEL_DEF.match(line)
        if label:
            if label.group(1).startswith(".L_x_"):
                body.append(f"{renamer.labels(label.group(1))}:")
            continue
        if not _ADDR.match(line):
            continue
        text = _ENCODING.sub("", _ADDR.sub("", line)).strip()
        text = re.sub(r"`?\((\.L_x_\d+)\)", r"\1", text).replace("`", "")
        text = _UNIQUE_SUFFIX.sub(r"\1", renamer.labels(renamer.registers(text)))
        text = re.sub(r"\s+", " ", text)
        text = re.sub(r"\s*;$", " ;", text)
        if pending_line is not None and pending_line != last_line:
            body.append(pending_line)
            last_line = pending_line
        pending_line = None
        body.append(f"    {text}")
    flush()
    return "\n".join(out) + ("\n" if out else "")


def parse_listing(text: str) -> list[Function]:
    """A normalised listing back into functions and instructions (for views and diffs)."""
    functions: list[Function] = []
    current: Function | None = None
    segment, number = "", 0
    for line in text.splitlines():
        if line.startswith(".function "):
            current = Function(line.split(" ", 1)[1])
            functions.append(current)
            segment, number = "", 0
            continue
        if current is None:
            continue
        if line.startswith(".line "):
            parts = line.split()
            segment, number = parts[1], int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0
            current.items.append(("line", f"{segment} {number}"))
        elif line.endswith(":") and not line.startswith(" "):
            current.items.append(("label", line[:-1]))
        elif line.startswith("    "):
            insn = line.strip()
            m = _OPCODE.match(insn)
            opcode = m.group(1) if m else insn.split()[0]
            full = (m.group(1) + m.group(2)) if m else opcode
            current.instructions.append(Instruction(insn, opcode, full, segment, number))
            current.items.append(("insn", insn))
    return functions


def opcode_counts(functions: list[Function]) -> dict[str, int]:
    """How often each mnemonic (without modifiers) occurs, over all functions."""
    counts: dict[str, int] = {}
    for f in functions:
        for i in f.instructions:
            counts[i.opcode] = counts.get(i.opcode, 0) + 1
    return dict(sorted(counts.items()))


_PTX_HEADER = re.compile(r"^//\s*(Generated by|Compiler Build ID|Cuda compilation tools|Based on|\s*$)")
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\b")
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')


def normalize_ptx(raw: str) -> str:
    """Generated PTX without compiler-build comments, `.file` paths and `.loc` noise (a `// .line` comment instead)."""
    files = {m.group(1): _source_segment(m.group(2)) for m in map(_PTX_FILE.match, raw.splitlines()) if m}
    out: list[str] = []
    last: str | None = None
    for line in raw.splitlines():
        if _PTX_HEADER.match(line) or _PTX_FILE.match(line):
            continue
        m = _PTX_LOC.match(line)
        if m:
            mark = f"\t// .line {files.get(m.group(1), m.group(1))} {m.group(2)}"
            if mark != last:
                out.append(mark)
                last = mark
            continue
        if line.strip().startswith("$L__") and line.strip().endswith(":"):
            last = None
        out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return "\n".join(out) + "\n"


def cap(text: str, limit: int = MAX_LISTING_BYTES) -> str:
    """`text` cut at a line boundary to at most `limit` bytes, the cut marked."""
    data = text.encode()
    if len(data) <= limit:
        return text
    head = data[:limit].decode(errors="ignore").rsplit("\n", 1)[0]
    return f"{head}\n// [… listing cut at {limit} bytes of {len(data)}]\n"
