"""ptxas's report (`-Xptxas -v` / `ptxas -v`): split per target, and the resource usage it states (registers,
shared memory, stack, spills). The one home of the report's text patterns."""

from __future__ import annotations

import re
from typing import Any

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_REPORT_START = re.compile(r"^ptxas info\s*: \d+ bytes gmem")
_NAMED_TARGET = re.compile(r"for '(sm_\w+)'")


def parse_ptxas_resources(text: str) -> dict[str, Any]:
    """Per-function usage plus totals: max registers / smem / stack, summed spill bytes.

    Returns {} when the text holds no ptxas report (e.g. the compile failed before ptxas).
    """
    functions: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            functions.setdefault(current, {"name": current})["entry"] = True
            continue
        m = _PROPS.search(line)
        if m:
            current = m.group(1)
            functions.setdefault(current, {"name": current, "entry": False})
            continue
        m = _FRAME.search(line)
        if m and current:
            f = functions[current]
            f["stack_frame_bytes"], f["spill_store_bytes"], f["spill_load_bytes"] = (int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m and current:
            f = functions[current]
            f["registers"] = int(m.group(1))
            rest = m.group(2)
            if b := _BARRIERS.search(rest):
                f["barriers"] = int(b.group(1))
            if s := _SMEM.search(rest):
                f["smem_bytes"] = int(s.group(1))
            cmem = {f"cmem{bank}": int(size) for size, bank in _CMEM.findall(rest)}
            if cmem:
                f["cmem_bytes"] = cmem
    if not functions:
        return {}
    items = list(functions.values())

    def biggest(key: str) -> int:
        return max((f.get(key, 0) for f in items), default=0)

    return {
        "registers": biggest("registers"),
        "smem_bytes": biggest("smem_bytes"),
        "stack_frame_bytes": biggest("stack_frame_bytes"),
        "spill_store_bytes": sum(f.get("spill_store_bytes", 0) for f in items),
        "spill_load_bytes": sum(f.get("spill_load_bytes", 0) for f in items),
        "barriers": biggest("barriers"),
        "functions": items,
    }


def split_ptxas_report(stderr: str, targets: list[str]) -> dict[str, str] | None:
    """Each target's own ptxas report; None when the text is anything else or the split is unclear.

    ptxas runs once per target in -gencode order, each report starting with `N bytes gmem`.
    Any text that is not ptxas's (a front-end or host-compiler warning) makes the
    attribution ambiguous: None, and each target is built alone.
    """
    lines = stderr.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _REPORT_START.match(line)]
    if len(starts) != len(targets):
        return None
    if any(line.strip() for line in lines[: starts[0]]):
        return None  # a front-end message: which target's? build each alone
    parts: dict[str, str] = {}
    for target, start, end in zip(targets, starts, [*starts[1:], len(lines)], strict=True):
        block = lines[start:end]
        if any(not (line.startswith("ptxas ") or line.startswith(" ") or not line.strip()) for line in block):
            return None
        if set(_NAMED_TARGET.findall("".join(block))) - {target}:
            return None
        parts[target] = "".join(block)
    return parts
