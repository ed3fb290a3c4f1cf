"""`kernelwiki adopt`: what each code block of a wiki written without fence attributes is, and what would make it verifiable.

A team moving its KernelWiki repository onto kernelwiki converts its pages step by
step: adopt prints, per block that declares nothing, its classification
(snippets/classify.py) and the attributes to add; `--write` adds those that are
certain (`sketch` for fragments, `compile` for complete units and PTX modules,
`run` for programs) to the fence line and leaves the rest of the file byte for byte.
Python without an entry point is left as it is (its status is `syntax-ok`): only
its author can say whether it is pseudocode (`sketch`) or a program to complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

from snippets.attributes import language_of
from snippets.build import defines_main
from snippets.classify import FRAGMENT, PROGRAM, PTX_FRAGMENT, PTX_MODULE, UNIT, Classification, classify

WRITE = {FRAGMENT: "sketch", PTX_FRAGMENT: "sketch", UNIT: "compile", PTX_MODULE: "compile", PROGRAM: "run"}
"""Attributes `--write` adds per classification (none for Python scripts)."""


@dataclass
class Advice:
    """One block that declares nothing, what it is, and what adopt adds or suggests."""

    path: str  # page file, relative to the wiki root
    line: int  # the fence's file line
    lang: str
    classification: Classification
    write: str | None  # the attribute --write adds, or None

    def __str__(self) -> str:
        c = self.classification
        add = f"adds `{self.write}`" if self.write else f"suggest: {c.suggestion}"
        return f"{self.path}:{self.line}: {self.lang} block: {c.kind}: {c.reason}; {add}"


def advise(rel: str, body: str, body_line: int) -> list[Advice]:
    """Advice for every block of a page body whose fence has a known language and no attributes."""
    out: list[Advice] = []
    for token in MarkdownIt("commonmark").parse(body):
        if token.type != "fence" or token.map is None:
            continue
        lang, _word, rest = language_of(token.info)
        if lang is None or rest.strip():
            continue
        c = classify(lang, token.content, defines_main(lang, token.content))
        write = None if lang == "python" and c.kind != PROGRAM else WRITE.get(c.kind)
        out.append(Advice(rel, body_line + token.map[0], lang, c, write))
    return out


def write_attributes(path: Path, advice: list[Advice]) -> int:
    """Add each advice's attribute to its fence line in `path`; returns how many fences changed."""
    lines = path.read_text(encoding="utf-8").split("\n")
    changed = 0
    for a in advice:
        if a.write is None:
            continue
        i = a.line - 1
        fence = lines[i]
        stripped = fence.rstrip("\r")
        lines[i] = f"{stripped} {a.write}" + fence[len(stripped) :]
        changed += 1
    if changed:
        path.write_text("\n".join(lines), encoding="utf-8")
    return changed
