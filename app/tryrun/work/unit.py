"""A try request made into the one thing the runner builds: a `Snippet`, by the same extraction as a page's block.

The source goes into a fence of a one-block page (a tilde fence longer than any run of tildes in it, so nothing
in the source can close it) and `snippets.extract.extract_snippets` reads it back: the same closed attribute
vocabulary (`snippets.attributes.parse_attributes`), the same combination rules, hidden lines, fragment
classification and content hash as every block of the wiki. Then the runner checks it again
(`runner.verify.rechecked`) as it does every snippet. Whatever is wrong is a `Problem` naming the request's field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from snippets.architectures import ANY_TARGET, KNOWN_ARCHITECTURES, normalize_architecture, target_of
from snippets.attributes import LANGUAGES, MODES
from snippets.extract import extract_snippets
from snippets.snippet import Snippet

KNOWN_TARGETS: tuple[str, ...] = tuple(target_of(a) for a in KNOWN_ARCHITECTURES)
"""Targets a try run may name (cpp and python blocks may also name `any`)."""

TRY_PAGE = "try"
"""The page id of every try unit's records: never a page of the wiki (page ids cannot be claimed by it)."""

_ATTRIBUTE_NAMES = {"expect": "compile_fail", "name": "id", "ncu_kernel": "ncu-kernel"}
"""Keys of `Attributes.to_dict()` (the form the index keeps) → the fence's word for them."""


class TryIn(BaseModel):
    """`POST /api/try`: what to build, in which language, with which fence attributes, for which targets."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="the code, as a fence's content (hidden `//!`/`#!` lines work as on pages)")
    lang: str = Field(description="cuda, cpp, ptx or python (cu, c++ too)", max_length=20)
    targets: list[str] = Field(default_factory=list, description='e.g. ["sm_90a"]; `any` for cpp/python', max_length=32)
    attributes: str | dict[str, Any] = Field(
        default="",
        description='the fence attributes after the language word, as written on a page (`run timeout=10 sass="UTMALDG"`) '
        'or as a mapping ({"mode": "run", "sass": ["UTMALDG"]})',
    )
    snippet_id: str | None = Field(default=None, description="the page snippet this started from (PAGE_ID:N)", max_length=300)


@dataclass
class Problem:
    """One thing wrong with a request: the field and what to do."""

    field: str  # source | lang | targets | attributes | snippet_id
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"loc": ["body", self.field], "msg": self.message, "type": "value_error"}


class Invalid(ValueError):
    """The request cannot be built; `problems` name the fields."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = problems


@dataclass
class Unit:
    """A checked try request: the snippet the runner builds, for these targets."""

    snippet: Snippet  # id `try:…`, page `try`; built like any page block
    targets: list[str]  # normalized, e.g. ["sm_90a"]
    attributes: str  # the attributes as an info string (what the share page shows)
    snippet_id: str | None  # the page snippet it started from
    warnings: list[str] = field(default_factory=list)  # what the extraction warned about (e.g. timeout= on a compile block)

    @property
    def runs(self) -> bool:
        """Is this a program (mode run), whose run step needs a GPU?"""
        return self.snippet.mode == "run"

    def key(self, toolchain: str, executor: str) -> str:
        """sha256 of everything the result depends on: the content hash (source, language, attributes, build recipe),
        the targets, the toolchain and where it runs (`executor`: the GPUs, or that there are none)."""
        blob = json.dumps(
            [self.snippet.content_hash, sorted(self.targets), toolchain, executor], sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def attributes_text(attributes: str | dict[str, Any]) -> str:
    """The attributes as a fence's info string after the language word; a mapping is written out word by word
    (`{"mode": "run", "flags": ["-O3"]}` → `run flags="-O3"`) and then parsed like any fence. ValueError for a
    mapping that cannot be an info string."""
    if isinstance(attributes, str):
        return attributes.strip()
    words: list[str] = []
    for key, value in attributes.items():
        word = _ATTRIBUTE_NAMES.get(key, key)
        if key == "mode":
            if value not in MODES:
                raise ValueError(f"mode: '{value}' is not one of {', '.join(MODES)}")
            words.append(str(value))
            continue
        if isinstance(value, bool):
            if value:
                words.append(word)  # chain: true
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            words.append(f"{word}={value}")
            continue
        if isinstance(value, str):
            words.append(f"{word}={_quote(value)}")
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            if key in ("sass", "no_sass", "ptx", "no_ptx"):
                words.extend(f"{word}={_quote(v)}" for v in value)
            elif key == "flags":
                words.append(f"{word}={_quote(' '.join(value))}")
            elif key == "ncu":
                words.append(f"{word}={_quote('; '.join(value))}")
            else:  # arch, uses
                words.append(f"{word}={_quote(','.join(value))}")
            continue
        raise ValueError(f"{key}: a value must be a string, a number, true or a list of strings")
    return " ".join(words)


def _fence(source: str) -> str:
    longest = max((len(m) for m in re.findall(r"~+", source)), default=0)
    return "~" * max(3, longest + 1)


def build_unit(request: TryIn, max_source_bytes: int, max_targets: int, max_timeout_s: int) -> Unit:
    """The request as a snippet the runner can build, or Invalid naming every field that is wrong."""
    problems: list[Problem] = []
    source = request.source.replace("\r\n", "\n")
    size = len(source.encode())
    if not source.strip():
        problems.append(Problem("source", "empty: give the code to build"))
    elif size > max_source_bytes:
        problems.append(Problem("source", f"{size} bytes, more than this server's limit of {max_source_bytes}"))
    elif "\x00" in source:
        problems.append(Problem("source", "contains a NUL character"))
    lang = LANGUAGES.get(request.lang.strip().lower())
    if lang is None:
        problems.append(Problem("lang", f"'{request.lang[:40]}' is not a language of snippets (one of: {', '.join(LANGUAGES)})"))
    try:
        attrs = attributes_text(request.attributes)
    except ValueError as exc:
        problems.append(Problem("attributes", str(exc)))
        attrs = ""
    if "\n" in attrs or "\r" in attrs:
        problems.append(Problem("attributes", "must be one line (a fence's info string)"))
    targets: list[str] = []
    for raw in request.targets:
        value = raw.strip().lower()
        norm = ANY_TARGET if value == ANY_TARGET else target_of(normalize_architecture(value))
        if norm == ANY_TARGET and lang not in ("cpp", "python"):
            problems.append(Problem("targets", f"'any' is for cpp and python blocks; a {lang} block names a GPU target"))
        elif norm != ANY_TARGET and norm not in KNOWN_TARGETS:
            problems.append(Problem("targets", f"unknown target '{raw[:40]}' (known: {', '.join(KNOWN_TARGETS)})"))
        elif norm not in targets:
            targets.append(norm)
    if len(targets) > max_targets:
        problems.append(Problem("targets", f"{len(targets)} targets, more than this server's limit of {max_targets}"))
    if problems:
        raise Invalid(problems)
    assert lang is not None
    fence = _fence(source)
    body = f"{fence}{lang} {attrs}\n{source}{'' if source.endswith(chr(10)) else chr(10)}{fence}\n"
    archs = [normalize_architecture(t) for t in targets if t != ANY_TARGET]
    found, diagnostics = extract_snippets(TRY_PAGE, "source", body, 0, archs)
    if len(found) != 1:  # cannot happen with the fence above; said rather than assumed
        raise Invalid([Problem("source", "could not be read as one block")])
    snippet = found[0]
    warnings = [d.message.split(": ", 1)[-1] for d in diagnostics if d.severity == "warning"]
    if snippet.attributes.get("arch") and request.targets:
        problems.append(Problem("attributes", "arch= and targets both name targets: give them in `targets` only"))
    if snippet.error is not None and "no target architecture" in snippet.error:
        problems.append(Problem("targets", 'name at least one target, e.g. ["sm_90a"] (or arch= in attributes)'))
    elif snippet.error is not None:
        problems.append(Problem("attributes", snippet.error))
    if snippet.mode == "run" and snippet.timeout > max_timeout_s:
        problems.append(
            Problem("attributes", f"timeout={snippet.timeout} is longer than a try run may hold a GPU ({max_timeout_s} s)")
        )
    if not targets:
        targets = list(snippet.targets)
    if problems:
        raise Invalid(problems)
    snippet = replace(snippet, targets=targets)
    return Unit(snippet=snippet, targets=targets, attributes=attrs, snippet_id=request.snippet_id, warnings=warnings)


def with_id(snippet: Snippet, try_id: str) -> Snippet:
    """The snippet under its try run's id (`try:ID`): artifacts and records are filed under it."""
    return replace(snippet, id=f"{TRY_PAGE}:{try_id}")
