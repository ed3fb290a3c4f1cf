"""The data a page's code block becomes: `Snippet` and the blocks chained onto it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NEVER_BUILT_MODES: tuple[str, ...] = ("sketch", "fragment", "error")
"""Modes of blocks that are never compiled: sketches, fragments (blocks that declare nothing and are not a complete
program, snippets/classify.py), and blocks whose info string is invalid."""


@dataclass
class ChainPart:
    """An earlier block of the same page prepended to a snippet before it is built."""

    snippet_id: str  # id of the earlier block, `PAGE_ID:N`
    first_line: int  # file line of that block's first source line (the line after its fence)
    source: str  # its full source, hidden lines included


@dataclass
class Snippet:
    """One verifiable fenced block of a page, with everything needed to build and check it."""

    id: str  # stable id `PAGE_ID:N`, N counting the page's verifiable blocks from 1
    page_id: str  # id of the page
    path: str  # page file, relative to the wiki root (posix)
    index: int  # N in the id
    line: int  # 1-based file line of the opening fence
    lang: str  # cuda | cpp | ptx | python
    lang_word: str  # the first word of the info string as written (cu, c++, …)
    info: str  # the whole info string
    attributes: dict[str, Any]  # the attributes as given, parsed (see snippets.attributes.Attributes)
    mode: str  # run | compile | compile_fail | sketch; "fragment" (classified, snippets/classify.py); "error" when invalid
    targets: list[str]  # nvcc targets such as "sm_90a"; empty when none is declared
    source: str  # what the page shows: hidden lines removed
    full_source: str  # what is compiled: hidden lines included (their marker stripped)
    first_line: int  # file line of the first source line (line + 1)
    defines_main: bool  # the block defines `main` (cuda/cpp) or a `__main__` entry (python)
    name: str | None = None  # id=NAME, for uses=
    expect: str | None = None  # compile_fail's expected compiler text
    output: str | None = None  # text the program's stdout must contain
    timeout: int = 30  # run step wall-clock seconds
    flags: list[str] = field(default_factory=list)  # allow-listed extra nvcc flags
    checks: dict[str, list[str]] = field(default_factory=dict)  # sass / no_sass / ptx / no_ptx regexes
    chain: list[ChainPart] = field(default_factory=list)  # earlier blocks prepended, in page order
    hidden_lines: list[int] = field(default_factory=list)  # file lines hidden when the page is shown
    error: str | None = None  # why the block cannot be verified as written (invalid attributes, bad uses=)
    content_hash: str = ""  # sha256 of everything that goes into the build and the checks

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (round-trips through `Snippet.from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snippet:
        """Inverse of `to_dict`."""
        values = dict(data)
        values["chain"] = [ChainPart(**part) for part in values.get("chain", [])]
        return cls(**values)

    @property
    def verifiable(self) -> bool:
        """False for sketches and blocks in error: they are never compiled."""
        return self.mode not in NEVER_BUILT_MODES
