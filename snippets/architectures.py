"""GPU architectures and nvcc targets: the one list that pages, `arch=`, the runner and the service share.

A page or an `arch=` names an architecture in any spelling (`sm_90a`, `SM90A`);
it is normalized to `sm90a`, checked against `KNOWN_ARCHITECTURES`, and built
for the nvcc target `sm_90a`. A program built for a target runs, as evidence for
that target, only on a GPU of the matching compute capability: `sm_90`/`sm_90a`
on 9.0 (H100, H200), `sm_100`/`sm_100a` on 10.0 (B200), and a family target
`sm_100f` on any 10.x at least 10.0.

Standard library only: the lowest layer (snippets → runner → app).
"""

from __future__ import annotations

import re

KNOWN_ARCHITECTURES: tuple[str, ...] = (
    "sm70", "sm75", "sm80", "sm86", "sm87", "sm89", "sm90", "sm90a",
    "sm100", "sm100a", "sm100f", "sm101", "sm101a", "sm103", "sm103a",
    "sm110", "sm110a", "sm120", "sm120a", "sm121", "sm121a",
)  # fmt: skip
"""Normalized architectures a page's `architectures:` or a block's `arch=` may name: the build targets."""

FAMILIES: dict[str, str] = {"blackwell": "sm100", "hopper": "sm90", "ampere": "sm80"}
"""Architecture family names a page's `architectures:` may hold beside its targets (→ the architecture they name).
Kept as the page declares them: its `meta.architectures`, its rows in the architecture table (the facet, the
by-architecture view, the `arch` filter) and its search terms; never a build target: no block is compiled for one
(a page's `Page.architectures`, what the runner builds, leaves them out)."""

ANY_TARGET = "any"
"""Target of a block that needs no particular architecture: built once, run on any GPU."""


def normalize_architecture(value: str) -> str:
    """`sm_90a`, `SM90A`, `sm90a` → `sm90a` (unknown values are returned normalized, not validated)."""
    return re.sub(r"[\s_-]", "", str(value)).lower()


def target_of(architecture: str) -> str:
    """An architecture in any spelling → its nvcc target: `sm90a`, `SM_90A` → `sm_90a`."""
    return "sm_" + normalize_architecture(architecture)[2:]


def family(architecture: str) -> str:
    """`sm90a` → `sm90`, `sm100f` → `sm100`: the architecture without its `a`/`f` suffix; a family name is its own."""
    if architecture in FAMILIES:
        return architecture
    return architecture[:-1] if architecture[-1:] in ("a", "f") else architecture


def target_sort_key(target: str) -> tuple[int, str]:
    """`sm_90a` < `sm_100a` < `sm_120a`: targets in numeric order, then by name; `any` and other shapes first."""
    m = re.match(r"sm_?(\d+)", target, re.IGNORECASE)
    return (int(m.group(1)) if m else 0, target)


def compute_capability_of(target: str) -> tuple[int, int, bool] | None:
    """`sm_90a` → (9, 0, False); `sm_100f` → (10, 0, True: family); None for an unknown shape."""
    m = re.fullmatch(r"sm_(\d+)(\d)([af]?)", target)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3) == "f"


def runs_on(target: str, compute_capability: str) -> bool:
    """May a program built for `target` run, as evidence for it, on a GPU of `compute_capability` ("9.0")?

    `any` runs everywhere; a family target (`sm_100f`) on the same major at least its minor;
    every other target only on exactly its own compute capability.
    """
    if target == ANY_TARGET:
        return True
    want = compute_capability_of(target)
    try:
        major, minor = (int(x) for x in compute_capability.split("."))
    except ValueError:
        return False
    if want is None:
        return False
    if want[2]:
        return major == want[0] and minor >= want[1]
    return (major, minor) == (want[0], want[1])
