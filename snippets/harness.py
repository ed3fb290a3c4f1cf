"""The measuring harness a page's program may use: which companion files go next to its source.

A `cuda`/`cpp` block that writes `#include "kw_measure.cuh"`, or a `python` block that imports
`kw_measure`, gets the harness file written into its build folder (and, for Python, copied to the
run folder with the script). The files live in snippets/harness/; their text is part of the
snippet's content hash, so changing the harness makes the evidence of every program using it stale.
How the harness measures and reports: docs/measurements.md.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

HARNESS_DIR = Path(__file__).with_name("harness")
CUDA_HEADER = "kw_measure.cuh"
PYTHON_MODULE = "kw_measure.py"

_USES = {
    "cuda": (re.compile(r'^\s*#\s*include\s*"kw_measure\.cuh"', re.M), CUDA_HEADER),
    "cpp": (re.compile(r'^\s*#\s*include\s*"kw_measure\.cuh"', re.M), CUDA_HEADER),
    "python": (re.compile(r"^\s*(?:import\s+kw_measure\b|from\s+kw_measure\s+import\b)", re.M), PYTHON_MODULE),
}


@cache
def harness_text(name: str) -> str:
    """The text of one harness file (read once, on first use)."""
    return (HARNESS_DIR / name).read_text(encoding="utf-8")


def companions(lang: str, sources: list[str]) -> dict[str, str]:
    """{file name: text} of the harness files that `sources` (the block and its chained blocks) use."""
    rule = _USES.get(lang)
    if rule is None:
        return {}
    pattern, name = rule
    return {name: harness_text(name)} if any(pattern.search(s) for s in sources) else {}
