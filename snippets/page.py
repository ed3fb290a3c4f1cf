"""A wiki page: its file's YAML front matter read into a validated `Page`, and the page files of a wiki folder.

Standard library and PyYAML only: the lowest layer, so that the runner reads
pages on GPU nodes without the service's web stack. Every problem becomes a
`Diagnostic` naming the file and line; a page with an error is left out, the
rest of the wiki is unaffected. Checks across pages live in app/pages.py.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from snippets.architectures import FAMILIES, KNOWN_ARCHITECTURES, normalize_architecture
from snippets.diagnostic import Diagnostic
from snippets.repository import (
    inside as inside,  # re-exported: app.index and app.pages import it from here
    open_repository,
    page_files,
    type_from_folder,
)

KNOWN_TYPES = frozenset({"hardware", "technique", "pattern", "api", "source", "concept", "guide", "reference", "tool"})
"""kernelwiki's built-in page types (snippets/schemas.yaml); a repository's data/schemas.yaml adds its own.
Whether a type is known is checked against the repository's schema (snippets/repository.py), by lint."""

LIST_FIELDS = ("languages", "tags", "aliases", "related", "sources")
KNOWN_FIELDS = frozenset({"id", "title", "type", "architectures", "confidence", "evidence_level", "evidence_basis", *LIST_FIELDS})
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""Ids are letters, digits, - _ . (KernelWiki repositories use ids such as pr-TensorRT-LLM-10042)."""
MAX_FRONT_MATTER_BYTES = 64 * 1024
"""Front matter larger than this is refused: it is metadata, not content."""


@dataclass
class Page:
    """A validated wiki page: front matter fields plus the Markdown body."""

    id: str  # unique page id
    title: str  # human title
    type: str  # hardware, technique, pattern, api, source, ...
    path: str  # file path relative to the wiki root, posix style
    body: str  # Markdown after the front matter, LF line endings
    body_line: int  # 1-based file line of the body's first line
    content_hash: str  # sha256 of the file's bytes, for incremental reindexing
    architectures: list[str] = field(default_factory=list)  # the build targets, normalized: ["sm90a", "sm100a"]
    languages: list[str] = field(default_factory=list)  # '*' means any
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)  # its own, then those merged from data/aliases.yaml (the index's)
    alias_ranks: dict[str, int] = field(default_factory=dict)  # merged alias → how it is held (snippets/repository.py)
    related: list[str] = field(default_factory=list)  # page ids
    sources: list[str] = field(default_factory=list)  # ids of `type: source` pages
    confidence: str | None = None  # verified, source-reported, inferred, ...
    evidence_level: str | None = None  # spec, benchmark, upstream-code, ...
    evidence_basis: list[dict[str, str]] = field(default_factory=list)  # [{source_id, evidence_type}]
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, JSON-safe
    families: list[str] = field(default_factory=list)  # family names of `architectures:` (blackwell): never built
    front: dict[str, Any] = field(default_factory=dict)  # the front matter as written, JSON-safe (the schema checks read it)
    field_lines: dict[str, int] = field(default_factory=dict)  # front-matter key -> file line

    @property
    def declared_architectures(self) -> list[str]:
        """`architectures:` as the page declares it, normalized: its targets, then its families (snippets.architectures
        FAMILIES). What the index stores and shows; only `architectures` is built."""
        return [*self.architectures, *self.families]

    def line_of(self, key: str) -> int:
        """File line of a front-matter key, or 1 when it is absent."""
        return self.field_lines.get(key, 1)


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where available (about ten times faster), else PyYAML's."""


def _refuse_aliases(node: Any) -> None:
    """Raise when a node is reached twice: that is a YAML alias, how 'billion laughs' bombs expand."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in front matter", current.start_mark
            )
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack += [key, value]
        elif isinstance(current, yaml.SequenceNode):
            stack += current.value


def _json_safe(value: Any) -> Any:
    """Dates become ISO strings; anything not JSON-representable becomes its string form."""
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _split(text: str, rel: str) -> tuple[str, int, str, int] | Diagnostic:
    """Split a page into (front matter, its first line, body, body's first line)."""
    if not text.strip():
        return Diagnostic(rel, 1, "error", "empty file: a page needs YAML front matter between '---' lines")
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return Diagnostic(rel, 1, "error", "missing front matter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            front = "\n".join(lines[1:i])
            body = "\n".join(lines[i + 1 :])
            return front, 2, body, i + 2
    return Diagnostic(rel, 1, "error", "unclosed front matter: no closing '---' line")


def _as_list(value: Any, key: str, line: int, rel: str, diags: list[Diagnostic], warn_scalar: bool) -> list[str]:
    """Coerce a front-matter list field to a list of strings, reporting odd shapes."""
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        if warn_scalar:
            diags.append(Diagnostic(rel, line, "warning", f"'{key}' should be a list; read '{value}' as a one-item list"))
        return [str(value)]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                out.append(str(item))
            else:
                diags.append(Diagnostic(rel, line, "warning", f"'{key}' item {item!r} is not a string; ignored"))
        return out
    diags.append(Diagnostic(rel, line, "error", f"'{key}' must be a list, not {type(value).__name__}"))
    return []


def parse_page(raw: bytes, rel: str) -> tuple[Page | None, list[Diagnostic]]:
    """Parse one page's bytes; `rel` is its path relative to the wiki root (for messages)."""
    diags: list[Diagnostic] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, [Diagnostic(rel, line, "error", f"not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}")]
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    split = _split(text, rel)
    if isinstance(split, Diagnostic):
        return None, [split]
    front, front_line, body, body_line = split
    if len(front.encode()) > MAX_FRONT_MATTER_BYTES:
        return None, [Diagnostic(rel, 1, "error", f"front matter is larger than {MAX_FRONT_MATTER_BYTES} bytes")]
    loader = _Loader(front)
    try:
        node = loader.get_single_node()
        if node is not None:
            _refuse_aliases(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        line = front_line + mark.line if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [Diagnostic(rel, line, "error", f"invalid YAML: {problem}")]
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        return None, [Diagnostic(rel, front_line, "error", f"front matter must be a mapping of keys to values, not {kind}")]

    field_lines = {str(k.value): front_line + k.start_mark.line for k, _ in node.value if isinstance(k, yaml.ScalarNode)}

    def line_of(key: str) -> int:
        """The file line of a front-matter key (the front matter's first line when the key is absent)."""
        return field_lines.get(key, front_line)

    page_id = data.get("id")
    title = data.get("title")
    ok = True
    if page_id is None or str(page_id).strip() == "":
        diags.append(Diagnostic(rel, front_line, "error", "missing required field 'id'"))
        ok = False
    else:
        page_id = str(page_id)
        if "/" in page_id or "\\" in page_id or ".." in page_id or page_id.endswith(".md"):
            diags.append(
                Diagnostic(rel, line_of("id"), "error", f"id '{page_id}' looks like a path; use a name such as 'hw-tma'")
            )
            ok = False
        elif not ID_PATTERN.match(page_id):
            diags.append(
                Diagnostic(rel, line_of("id"), "error", f"id '{page_id}' may hold only letters, digits, '-', '_' and '.'")
            )
            ok = False
    if title is None or not str(title).strip():
        diags.append(Diagnostic(rel, front_line, "error", "missing required field 'title'"))
        ok = False

    page_type = str(data.get("type") or type_from_folder(rel) or "concept")

    archs: list[str] = []
    families: list[str] = []
    for value in _as_list(data.get("architectures"), "architectures", line_of("architectures"), rel, diags, True):
        norm = normalize_architecture(value)
        if norm in FAMILIES:
            if norm not in families:
                families.append(norm)
        elif norm not in KNOWN_ARCHITECTURES:
            diags.append(
                Diagnostic(
                    rel,
                    line_of("architectures"),
                    "error",
                    f"unknown architecture '{value}' (known: {', '.join(KNOWN_ARCHITECTURES)})",
                )
            )
            ok = False
        elif norm not in archs:
            archs.append(norm)

    lists = {key: _as_list(data.get(key), key, line_of(key), rel, diags, key != "languages") for key in LIST_FIELDS}
    basis: list[dict[str, str]] = []
    raw_basis = data.get("evidence_basis")
    if raw_basis is not None:
        for item in raw_basis if isinstance(raw_basis, list) else [raw_basis]:
            if isinstance(item, dict) and "source_id" in item:
                basis.append({"source_id": str(item["source_id"]), "evidence_type": str(item.get("evidence_type", ""))})
            else:
                diags.append(
                    Diagnostic(
                        rel, line_of("evidence_basis"), "warning", f"evidence_basis item {item!r} needs a source_id; ignored"
                    )
                )

    if not ok:
        return None, diags
    extra = {str(k): _json_safe(v) for k, v in data.items() if str(k) not in KNOWN_FIELDS}
    page = Page(
        id=str(page_id),  # a str already: the checks above turned it into one
        title=str(title).strip(),
        type=page_type,
        path=rel,
        body=body,
        body_line=body_line,
        content_hash=hashlib.sha256(raw).hexdigest(),
        architectures=archs,
        confidence=None if data.get("confidence") is None else str(data["confidence"]),
        evidence_level=None if data.get("evidence_level") is None else str(data["evidence_level"]),
        evidence_basis=basis,
        extra=extra,
        families=families,
        alias_ranks={},  # the index merges data/aliases.yaml's (app/index/build.py)
        front=_json_safe(data),
        field_lines=field_lines,
        **lists,
    )
    return page, diags


def iter_page_files(root: Path) -> list[Path]:
    """Every page file of the wiki, in a stable order: the page folders of a repository root (snippets/repository.py),
    hidden folders, links leaving the root and Markdown that is not a page (README, SKILL bundles, templates) skipped."""
    found, _skipped = page_files(open_repository(root))
    return [path for _rel, path in found]


def relative_path(path: Path, root: Path) -> str:
    """A page file's path relative to the wiki root, posix style."""
    return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()


def load_page(path: Path, root: Path) -> tuple[Page | None, list[Diagnostic]]:
    """Read and parse one page file; an unreadable file is a diagnostic, not an exception."""
    rel = relative_path(path, root)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return None, [Diagnostic(rel, 1, "error", f"cannot read file: {exc.strerror}")]
    return parse_page(raw, rel)


class PageIds:
    """Who owns each page id: the first page to claim an id keeps it, a later one is left out with an error.

    The one duplicate-id rule of `kernelwiki lint` (app/index/pages.py), the index build (app/index/build.py)
    and the runner (runner/verify.py); give pages in path order so the same page wins everywhere."""

    def __init__(self, owners: dict[str, str] | None = None) -> None:
        self.owners: dict[str, str] = dict(owners or {})  # page id → path of the page that owns it

    def claim(self, page: Page) -> Diagnostic | None:
        """None when `page` now owns its id; else the error for `page`, which is to be left out."""
        return self.claim_id(page.id, page.path, page.line_of("id"))

    def claim_id(self, page_id: str, path: str, id_line: int) -> Diagnostic | None:
        """`claim` for the page at `path` whose id, `page_id`, is on file line `id_line`."""
        owner = self.owners.setdefault(page_id, path)
        if owner == path:
            return None
        return Diagnostic(path, id_line, "error", f"duplicate id '{page_id}': also used by {owner}; this page is left out")
