"""A wiki as a KernelWiki repository: where its pages are, which Markdown is not a page, and its schema as data.

`--wiki` may name a plain folder of pages (kernelwiki's own wiki/) or a
repository root in the KernelWiki layout: `wiki/` and `sources/` page folders
next to `data/schemas.yaml` (fields per page type), `data/tags.yaml` (closed
vocabularies) and `data/aliases.yaml` (canonical term → aliases). Without
those files the built-in schema applies: snippets/schemas.yaml and
snippets/tags.yaml, written in the same format, so one mechanism checks both.

Standard library and PyYAML only (the runner reads pages too).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from snippets.diagnostic import Diagnostic

DEFAULT_PAGE_FOLDERS = ("wiki", "sources")
"""Page folders of a repository root, where present; KERNELWIKI_PAGE_FOLDERS (comma-separated) overrides them."""

PAGE_FOLDERS_ENV = "KERNELWIKI_PAGE_FOLDERS"

NOT_PAGES = frozenset({"readme.md", "skill.md", "agents.md", "claude.md", "changelog.md", "contributing.md", "license.md"})
"""File names (any case) that are documentation about a folder, never pages: skipped with an info line."""

TEMPLATE_FOLDERS = frozenset({"templates", "template", "_templates"})
"""Folders of page templates: skipped with an info line."""

FOLDER_TYPES = {
    "sources/prs": "source-pr",
    "sources/docs": "source-doc",
    "sources/blogs": "source-blog",
    "sources/contests": "source-contest",
}
"""The type of a page that declares none, from its folder (the KernelWiki layout; longest prefix wins)."""

TERM_ID_PREFIXES = ("hw-", "technique-", "pattern-", "kernel-", "lang-", "api-", "concept-", "guide-", "reference-", "tool-")
"""Short type prefixes an id may put before a canonical term of data/aliases.yaml (`hw-tma` ↔ tma), for a page whose
type declares no `id_prefix` in the schema (where it does, that prefix alone)."""

ALIAS_OWN, ALIAS_NAMED, ALIAS_BY_ID = 0, 1, 2
"""How a page holds an alias, strongest first: written in its own front matter; merged from data/aliases.yaml for a term
its own aliases or title name; merged for a term its id names (`Repository.aliases_for`). Where several pages hold one
name, `/a/NAME`, resolve and search's exact match take the strongest holder (then the first id)."""

BUILTIN_SCHEMA = Path(__file__).with_name("schemas.yaml")
BUILTIN_TAGS = Path(__file__).with_name("tags.yaml")

VOCABULARY_FIELDS = {
    "architectures": "architectures",
    "hardware_features": "hardware_features",
    "techniques": "techniques",
    "kernel_types": "kernel_types",
    "languages": "languages",
    "confidence": "confidence",
    "reproducibility": "reproducibility",
    "source_category": "source_categories",
    "evidence_level": "evidence_level",
}
"""Front-matter field → the list of the tags file its values must come from (when that list exists)."""

REPRODUCIBILITY_FIELD = "reproducibility"


def is_source_type(page_type: str) -> bool:
    """`source` (kernelwiki) and `source-pr`, `source-doc`, … (KernelWiki) are all source pages."""
    return page_type == "source" or page_type.startswith("source-")


def type_from_folder(rel: str) -> str | None:
    """`sources/prs/cutlass/PR-1.md` → `source-pr`; None outside a typed folder."""
    best: str | None = None
    for prefix in FOLDER_TYPES:
        if rel.startswith(prefix + "/") and (best is None or len(prefix) > len(best)):
            best = prefix
    if best is not None:
        return FOLDER_TYPES[best]
    return "source" if rel.startswith("sources/") else None


@dataclass
class TypeSchema:
    """One page type's entry of a schemas file."""

    name: str  # the entry's key: `wiki-hardware`, `source-pr`, `hardware`
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    constraints: dict[str, Any] = field(default_factory=dict)  # field: value(s), X_required_when, id_prefix, …


@dataclass
class Repository:
    """Where a wiki's pages are and the schema they follow."""

    root: Path  # what --wiki named, resolved
    page_folders: list[str]  # relative folders searched for pages ("" = the whole root)
    schema_file: str  # the schemas file in use, for messages ("data/schemas.yaml" or "built-in")
    types: dict[str, TypeSchema]  # page type → its schema (both `hardware` and `wiki-hardware` spellings resolve)
    vocabulary: dict[str, list[str]]  # tags-file list name → allowed values, in order
    aliases: dict[str, list[str]]  # canonical term → aliases (data/aliases.yaml)
    problems: list[Diagnostic] = field(default_factory=list)  # unreadable data files

    @property
    def is_layout(self) -> bool:
        """Whether the root is a repository root with page folders (not a plain folder of pages)."""
        return self.page_folders != [""]

    def schema_for(self, page_type: str) -> TypeSchema | None:
        return self.types.get(page_type) or self.types.get(f"wiki-{page_type}")

    def known_types(self) -> list[str]:
        return sorted({name.removeprefix("wiki-") for name in self.types})

    def term_prefixes(self, page_type: str) -> tuple[str, ...]:
        """The short prefixes an id of this type puts before a term: its schema's `id_prefix`, else TERM_ID_PREFIXES."""
        schema = self.schema_for(page_type)
        declared = schema.constraints.get("id_prefix") if schema is not None else None
        return (str(declared),) if isinstance(declared, str) and declared else TERM_ID_PREFIXES

    def aliases_for(self, page_id: str, page_type: str, title: str, own: list[str]) -> list[tuple[str, int]]:
        """The global aliases (data/aliases.yaml) a page takes on, each with how it holds them (ALIAS_NAMED, ALIAS_BY_ID).

        A source page takes none: it is evidence about a term, not the page about it. Another page claims a
        canonical term when its own aliases or its title name the term or one of the term's names (ALIAS_NAMED:
        `aliases: [TMA]` claims tma), or else when its id is the term or exactly its type's short prefix followed
        by the term (ALIAS_BY_ID: `hw-tma`; never `doc-cuda-13-0-2-tma` or `migration-wgmma-to-tcgen05`, where the
        term only ends a longer id). It then takes those of the term's names and the term it does not hold in any case.
        Case-insensitive throughout; a page's claims depend on the page alone (it is parsed alone), and where two
        pages claim one term the strongest holder of each name wins (ALIAS_OWN, ALIAS_NAMED, ALIAS_BY_ID).
        """
        if not self.aliases or is_source_type(page_type):
            return []
        held = {a.strip().lower() for a in own}
        naming = held | {title.strip().lower()}
        pid = page_id.lower()
        named_by_id = {pid} | {pid[len(p) :] for p in self.term_prefixes(page_type) if pid.startswith(p.lower())}
        extra: list[tuple[str, int]] = []
        for term, names in self.aliases.items():
            every = [*names, term]  # the names first: `TMA` is shown rather than the term `tma`
            if naming & {n.strip().lower() for n in every}:
                rank = ALIAS_NAMED
            elif term.strip().lower() in named_by_id:
                rank = ALIAS_BY_ID
            else:
                continue
            for name in every:
                if name.strip() and name.strip().lower() not in held and name.strip().lower() != pid:
                    extra.append((name, rank))
                    held.add(name.strip().lower())
        return extra


def _read_yaml(path: Path, rel: str, problems: list[Diagnostic]) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Diagnostic(rel, 1, "error", f"cannot read {rel}: {exc}"))
        return {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problems.append(Diagnostic(rel, (mark.line + 1) if mark else 1, "error", f"invalid YAML: {exc}"))
        return {}
    if not isinstance(data, dict):
        problems.append(Diagnostic(rel, 1, "error", f"{rel} must be a mapping"))
        return {}
    return data


def _schema_entries(data: dict[str, Any]) -> dict[str, TypeSchema]:
    """Page-type entries of a schemas file: those that name `wiki-*`/`source-*` types or the built-in ones."""
    types: dict[str, TypeSchema] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or "required" not in entry:
            continue
        name = str(name)
        if not (name.startswith(("wiki-", "source-")) or "title" in (entry.get("required") or [])):
            continue  # schemas of other files of the repository (PROVENANCE.yaml, registries)
        types[name] = TypeSchema(
            name=name,
            required=[str(x) for x in entry.get("required") or []],
            optional=[str(x) for x in entry.get("optional") or []],
            constraints=dict(entry.get("constraints") or {}),
        )
    return types


def page_folders_of(root: Path, override: list[str] | None = None) -> list[str]:
    """The page folders under `root`: the override, KERNELWIKI_PAGE_FOLDERS, `wiki/`+`sources/` when `wiki/` is there, else the root."""
    wanted = override
    if wanted is None and os.environ.get(PAGE_FOLDERS_ENV, "").strip():
        wanted = [p.strip().strip("/") for p in os.environ[PAGE_FOLDERS_ENV].split(",") if p.strip()]
    if wanted is not None:
        return [p for p in wanted if (root / p).is_dir()] or [""]
    if (root / "wiki").is_dir():
        return [p for p in DEFAULT_PAGE_FOLDERS if (root / p).is_dir()]
    return [""]


def open_repository(root: Path | str, page_folders: list[str] | None = None) -> Repository:
    """Read a wiki root's layout, schema, vocabulary and aliases (the built-in ones where the repository has none)."""
    root = Path(root).resolve()
    problems: list[Diagnostic] = []
    folders = page_folders_of(root, page_folders)
    schema_path = root / "data" / "schemas.yaml"
    if schema_path.is_file():
        types = _schema_entries(_read_yaml(schema_path, "data/schemas.yaml", problems))
        schema_file = "data/schemas.yaml"
    else:
        types = _schema_entries(_read_yaml(BUILTIN_SCHEMA, "snippets/schemas.yaml", problems))
        schema_file = "built-in schema"
    tags_path = root / "data" / "tags.yaml"
    raw_vocab = (
        _read_yaml(tags_path, "data/tags.yaml", problems)
        if tags_path.is_file()
        else _read_yaml(BUILTIN_TAGS, "snippets/tags.yaml", problems)
    )
    vocabulary = {str(k): [str(x) for x in v] for k, v in raw_vocab.items() if isinstance(v, list)}
    aliases: dict[str, list[str]] = {}
    aliases_path = root / "data" / "aliases.yaml"
    if aliases_path.is_file():
        for term, names in _read_yaml(aliases_path, "data/aliases.yaml", problems).items():
            if isinstance(names, list):
                aliases[str(term)] = [str(n) for n in names if isinstance(n, (str, int, float))]
    return Repository(root, folders, schema_file, types, vocabulary, aliases, problems)


def inside(real_path: str, real_root: str) -> bool:
    """Whether a resolved path lies under the resolved wiki root: nothing outside it is ever published."""
    return real_path == real_root or real_path.startswith(real_root.rstrip(os.sep) + os.sep)


def not_a_page(rel: str) -> str | None:
    """Why a Markdown file under a page folder is not a page (README, SKILL bundle, template), or None."""
    folder, _, name = rel.rpartition("/")
    return name_not_a_page(name) or folder_not_pages(folder)


def name_not_a_page(name: str) -> str | None:
    """Why a Markdown file of this name is not a page wherever it lies (it documents its folder), or None."""
    return f"{name} documents its folder; it is not a page" if name.lower() in NOT_PAGES else None


def folder_not_pages(folder: str) -> str | None:
    """Why no Markdown file in `folder` (posix, relative to the root) is a page (a template folder), or None.

    Asked once per folder by a walk (app/index/build.py), not once per file."""
    if any(p.lower() in TEMPLATE_FOLDERS for p in folder.split("/")):
        return "a page template, not a page"
    return None


def skill_folders(root: Path, folders: list[str]) -> set[str]:
    """Folders (relative) that hold a SKILL.md: agent skill bundles, whose Markdown files are not pages."""
    found: set[str] = set()
    for top in folders:
        base = root / top if top else root
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            if any(f.lower() == "skill.md" for f in filenames):
                found.add(Path(dirpath).relative_to(root).as_posix())
    return found


def page_files(repo: Repository) -> tuple[list[tuple[str, Path]], list[Diagnostic]]:
    """(rel path, path) of every page file in the page folders, and an info line per Markdown file skipped."""
    real_root = os.path.realpath(repo.root)
    skills = skill_folders(repo.root, repo.page_folders)
    found: list[tuple[str, Path]] = []
    infos: list[Diagnostic] = []
    for top in repo.page_folders:
        base = repo.root / top if top else repo.root
        for path in base.rglob("*.md"):
            rel = path.relative_to(repo.root).as_posix()
            if any(part.startswith(".") for part in rel.split("/")) or not path.is_file():
                continue
            if not inside(os.path.realpath(path), real_root):
                continue
            reason = not_a_page(rel) or next(
                (f"part of the agent skill bundle {s}/, not a page" for s in skills if rel.startswith(s + "/")), None
            )
            if reason is not None:
                infos.append(Diagnostic(rel, 1, "info", f"skipped: {reason}"))
                continue
            found.append((rel, path))
    return sorted(found), sorted(infos, key=lambda d: d.path)


# -- the schema checks ----------------------------------------------------------------------------------------------

_COND = re.compile(r"^\s*(\w+)\s*(==|!=)\s*['\"]?([^'\"]+?)['\"]?\s*$")
_IN = re.compile(r"^\s*(\w+)\s+in\s+\[([^\]]*)\]\s*$")
_PRESENT = re.compile(r"^\s*(\w+)\s+present\s*$")


def condition_holds(expr: str, data: dict[str, Any]) -> bool | None:
    """Evaluate a `*_required_when` condition ("status == merged", "mode in [a, b] and x present"); None when unreadable."""
    result = True
    for clause in re.split(r"\s+and\s+", expr):
        if m := _COND.match(clause):
            value = data.get(m.group(1))
            holds = str(value) == m.group(3) if value is not None else False
            result = result and (holds if m.group(2) == "==" else not holds)
        elif m := _IN.match(clause):
            options = [x.strip().strip("'\"") for x in m.group(2).split(",")]
            result = result and str(data.get(m.group(1))) in options
        elif m := _PRESENT.match(clause):
            result = result and data.get(m.group(1)) not in (None, "", [])
        else:
            return None
    return result


def _values(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value if not isinstance(v, dict)]
    return [str(value)]


def check_page(repo: Repository, page_id: str, page_type: str, data: dict[str, Any], line_of: Any, rel: str) -> list[Diagnostic]:
    """A page's front matter (`data`, as written) against its type's schema and the vocabulary: errors naming the rule's file."""
    diags: list[Diagnostic] = []
    src = repo.schema_file
    schema = repo.schema_for(page_type)
    if schema is None:
        known = ", ".join(repo.known_types())
        return [Diagnostic(rel, line_of("type"), "warning", f"unknown type '{page_type}' ({src} knows: {known})")]
    for key in schema.required:
        if key not in data or data[key] is None:
            diags.append(Diagnostic(rel, 1, "error", f"missing required field '{key}' for type '{schema.name}' ({src})"))
    for key, rule in schema.constraints.items():
        if key.endswith("_required_when"):
            target = key.removesuffix("_required_when")
            holds = condition_holds(str(rule), data)
            if holds is None:
                diags.append(Diagnostic(rel, 1, "warning", f"{src}: cannot read the condition {key}: {rule!r}; not checked"))
            elif holds and data.get(target) in (None, "", []):
                diags.append(Diagnostic(rel, 1, "error", f"'{target}' is required when {rule} (type '{schema.name}', {src})"))
        elif key == "id_prefix":
            if not page_id.startswith(str(rule)):
                diags.append(
                    Diagnostic(
                        rel, line_of("id"), "error", f"id '{page_id}' must start with '{rule}' (type '{schema.name}', {src})"
                    )
                )
        elif key == "reproducibility_minimum":
            levels = repo.vocabulary.get(REPRODUCIBILITY_FIELD, [])
            have = data.get(REPRODUCIBILITY_FIELD)
            if (
                have is not None
                and str(have) in levels
                and str(rule) in levels
                and levels.index(str(have)) < levels.index(str(rule))
            ):
                diags.append(
                    Diagnostic(
                        rel,
                        line_of(REPRODUCIBILITY_FIELD),
                        "error",
                        f"reproducibility '{have}' is below the minimum '{rule}' for type '{schema.name}' ({src})",
                    )
                )
        elif key in data or key in schema.required or key in schema.optional:
            allowed = [str(x) for x in rule] if isinstance(rule, list) else [str(rule)]
            if key == "type":
                continue  # the type is how this schema was chosen
            for value in _values(data.get(key)):
                if value not in allowed:
                    diags.append(
                        Diagnostic(
                            rel,
                            line_of(key),
                            "error",
                            f"{key} '{value}' is not allowed for type '{schema.name}' (allowed: {', '.join(allowed)}; {src})",
                        )
                    )
    diags += check_vocabulary(repo, data, line_of, rel)
    return diags


def check_vocabulary(repo: Repository, data: dict[str, Any], line_of: Any, rel: str) -> list[Diagnostic]:
    """Values of the closed fields, and tags, against the tags file (a repository's data/tags.yaml or the built-in)."""
    diags: list[Diagnostic] = []
    tags_file = "data/tags.yaml" if repo.schema_file == "data/schemas.yaml" else "built-in vocabulary"
    for key, list_name in VOCABULARY_FIELDS.items():
        allowed = repo.vocabulary.get(list_name)
        if allowed is None or key not in data:
            continue
        for value in _values(data.get(key)):
            if value not in allowed:
                diags.append(Diagnostic(rel, line_of(key), "error", f"{key} '{value}' is not in {tags_file} ({list_name})"))
    basis_types = repo.vocabulary.get("evidence_types")
    if basis_types is not None and isinstance(data.get("evidence_basis"), list):
        for item in data["evidence_basis"]:
            if isinstance(item, dict) and item.get("evidence_type") is not None and str(item["evidence_type"]) not in basis_types:
                diags.append(
                    Diagnostic(
                        rel,
                        line_of("evidence_basis"),
                        "error",
                        f"evidence_type '{item['evidence_type']}' is not in {tags_file} (evidence_types)",
                    )
                )
    if "tags" in data and repo.schema_file == "data/schemas.yaml":
        every = {v for values in repo.vocabulary.values() for v in values}
        for value in _values(data.get("tags")):
            if value not in every:
                diags.append(Diagnostic(rel, line_of("tags"), "error", f"tag '{value}' is not in {tags_file}"))
    return diags
