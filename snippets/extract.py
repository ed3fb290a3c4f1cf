"""Finding a page's code blocks with markdown-it-py and turning them into `Snippet`s.

Blocks are found by the CommonMark parser, never by regular expressions, so a
fence inside a longer fence, a list or a block quote is treated exactly as the
page renders it. Invalid attributes make the block an `error` snippet plus a
`Diagnostic` naming the fence's line; nothing is silently dropped.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from snippets.architectures import ANY_TARGET, normalize_architecture, target_of
from snippets.attributes import DEFAULT_RUN_TIMEOUT_S, Attributes, InfoStringError, language_of, parse_attributes
from snippets.build import BUILD_RECIPE, PRELUDE, defines_main
from snippets.classify import FRAGMENT, classify
from snippets.diagnostic import Diagnostic
from snippets.harness import companions
from snippets.snippet import ChainPart, Snippet

_HIDDEN = {"python": re.compile(r"^#!(?: (.*)|\s*)$")}
_HIDDEN_C = re.compile(r"^//!(?: (.*)|\s*)$")


_PARSERS: list[MarkdownIt] = []


def _parser() -> MarkdownIt:
    """One CommonMark parser of blocks per process, made on first use: building one (its rule chains) costs
    more than parsing a page, and parsing keeps its state in per-call objects, so calls and threads may share it.

    Code blocks are blocks: the inline content of paragraphs and headings is left unparsed (half the work).
    Configured as the parser that renders pages (app/index/markdown.py), so a block is verified exactly when
    the page shows it as code: raw HTML off (a fence inside `<!-- … -->` is shown, so it is a block) and
    tables on (a fence line holding `|` above a delimiter row is a table row)."""
    if not _PARSERS:
        _PARSERS.append(MarkdownIt("commonmark", {"html": False}).enable("table").disable(["inline", "text_join"]))
    return _PARSERS[0]


def fence_words(body: str) -> list[str]:
    """The language word of every fenced block of a body as written (`bash`, `cuda`; "" for a fence without one),
    in page order: code the page shows, whether kernelwiki verifies its language or not. Found by the same parser
    as the snippets (`_parser`)."""
    return [language_of(t.info)[1] for t in _parser().parse(body) if t.type == "fence"]


def split_hidden(lang: str, content: str, first_line: int) -> tuple[str, str, list[int]]:
    """(visible source, full source, file lines of hidden lines) of a block's content."""
    pattern = _HIDDEN.get(lang, _HIDDEN_C)
    visible: list[str] = []
    full: list[str] = []
    hidden: list[int] = []
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for offset, line in enumerate(lines):
        m = pattern.match(line)
        if m:
            full.append(m.group(1) or "")
            hidden.append(first_line + offset)
        else:
            full.append(line)
            visible.append(line)
    join = lambda xs: "\n".join(xs) + "\n" if xs else ""  # noqa: E731
    return join(visible), join(full), hidden


def content_hash(snippet: Snippet) -> str:
    """sha256 over everything that changes the build or the checks (not the block's position)."""
    payload: dict[str, Any] = {
        "recipe": BUILD_RECIPE,
        "lang": snippet.lang,
        "source": snippet.full_source,
        "chain": [part.source for part in snippet.chain],
        "prelude": PRELUDE if snippet.lang in ("cuda", "cpp") else "",
        "mode": snippet.mode,
        "expect": snippet.expect,
        "output": snippet.output,
        "timeout": snippet.timeout,
        "flags": snippet.flags,
        "checks": snippet.checks,
        "error": snippet.error,
    }
    harness = companions(snippet.lang, [part.source for part in snippet.chain] + [snippet.full_source])
    if harness:  # only then, so that the hashes of blocks without the harness stay as they were
        payload["harness"] = harness
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def _check_combinations(lang: str, mode: str, attrs: Attributes) -> tuple[list[str], list[str]]:
    """(errors, warnings) for attributes that make no sense for this language or mode."""
    errors: list[str] = []
    warnings: list[str] = []
    if lang == "ptx" and mode == "run":
        errors.append("a ptx block cannot be run (use compile, or a cuda block that loads the PTX)")
    if attrs.flags and lang not in ("cuda", "cpp"):
        errors.append(f"flags= applies to cuda and cpp blocks, not {lang}")
    if (attrs.sass or attrs.no_sass) and lang not in ("cuda", "ptx"):
        errors.append(f"sass=/no_sass= checks need device code: not available for {lang} blocks")
    if (attrs.ptx or attrs.no_ptx) and lang not in ("cuda", "ptx"):
        errors.append(f"ptx=/no_ptx= checks need device code: not available for {lang} blocks")
    if (attrs.ncu or attrs.ncu_kernel) and mode != "run":
        errors.append(f"ncu=/ncu-kernel= need a block that runs (this block's mode is {mode})")
    if attrs.ncu_kernel and not attrs.ncu:
        errors.append("ncu-kernel= names the kernel of ncu= assertions: give ncu= too")
    if attrs.output is not None and mode != "run":
        errors.append(f"output= needs a block that runs (this block's mode is {mode})")
    if attrs.timeout is not None and mode != "run":
        warnings.append(f"timeout= only applies to blocks that run (this block's mode is {mode}); ignored")
    if mode in ("sketch", "compile_fail") and (attrs.sass or attrs.no_sass or attrs.ptx or attrs.no_ptx):
        errors.append(f"sass/ptx checks cannot apply to a {mode} block")
    return errors, warnings


def extract_snippets(
    page_id: str,
    path: str,
    body: str,
    body_line: int,
    architectures: list[str],
    tokens: list[Token] | None = None,
) -> tuple[list[Snippet], list[Diagnostic]]:
    """Every verifiable block of a page body, in page order, plus the problems found.

    `body_line` is the 1-based file line of the body's first line; `architectures`
    are the page's normalized values ("sm90a", "sm100a", …). `tokens`: the body already parsed by a
    CommonMark parser with tables on (the index's one parse per page); parsed here when not given.
    """
    problems: list[Diagnostic] = []
    snippets: list[Snippet] = []
    page_targets = [target_of(a) for a in architectures]
    for token in _parser().parse(body) if tokens is None else tokens:
        if token.type != "fence" or token.map is None:
            continue
        lang, word, rest = language_of(token.info)
        if lang is None:
            continue
        line = body_line + token.map[0]
        first_line = line + 1
        index = len(snippets) + 1
        visible, full, hidden = split_hidden(lang, token.content, first_line)
        error: str | None = None
        try:
            attrs = parse_attributes(rest)
        except InfoStringError as exc:
            attrs = Attributes()
            error = str(exc)
        has_main = defines_main(lang, full)
        mode = attrs.mode or ("run" if has_main else "compile")
        if error is None and not rest.strip() and lang in ("cuda", "cpp") and not has_main:
            # a block that declares nothing: a fragment is never built (unverified), not reported `fail`
            if classify(lang, full, has_main).kind == FRAGMENT:
                mode = "fragment"
        if error is None:
            errors, warnings = _check_combinations(lang, mode, attrs)
            for message in warnings:
                problems.append(Diagnostic(path, line, "warning", f"{lang} block {page_id}:{index}: {message}"))
            if errors:
                error = errors[0]
                for message in errors[1:]:
                    problems.append(Diagnostic(path, line, "error", f"{lang} block {page_id}:{index}: {message}"))
        targets = [target_of(normalize_architecture(a)) for a in attrs.arch] if attrs.arch else list(page_targets)
        if error is None and not targets:
            if lang in ("cuda", "ptx") and mode != "sketch":
                error = "no target architecture: the page declares no `architectures` and the block has no arch="
            elif lang in ("cpp", "python"):
                targets = [ANY_TARGET]
        snippet = Snippet(
            id=f"{page_id}:{index}",
            page_id=page_id,
            path=path,
            index=index,
            line=line,
            lang=lang,
            lang_word=word,
            info=token.info.strip(),
            attributes=attrs.to_dict(),
            mode=mode,
            targets=targets,
            source=visible,
            full_source=full,
            first_line=first_line,
            defines_main=has_main,
            name=attrs.name,
            expect=attrs.expect,
            output=attrs.output,
            timeout=attrs.timeout or DEFAULT_RUN_TIMEOUT_S,
            flags=list(attrs.flags),
            checks={
                k: list(v)
                for k, v in (("sass", attrs.sass), ("no_sass", attrs.no_sass), ("ptx", attrs.ptx), ("no_ptx", attrs.no_ptx))
                if v
            }
            | ({"ncu": list(attrs.ncu)} if attrs.ncu else {})
            | ({"ncu_kernel": [attrs.ncu_kernel]} if attrs.ncu and attrs.ncu_kernel else {}),
            hidden_lines=hidden,
            error=error,
        )
        if error is None and attrs.name:
            clash = next((s for s in snippets if s.name == attrs.name), None)
            if clash is not None:
                snippet.error = f"id={attrs.name} is already used by the block at line {clash.line}"
        if snippet.error is None:
            snippet.error = _resolve_chain(snippet, attrs, snippets)
        if snippet.error is not None:
            snippet.mode = "error"
            problems.append(Diagnostic(path, line, "error", f"{lang} block {snippet.id}: {snippet.error}"))
        snippet.content_hash = content_hash(snippet)
        snippets.append(snippet)
    return snippets, problems


def _chain_eligible(snippet: Snippet, other: Snippet) -> bool:
    """May `other` be prepended to `snippet` by `chain`? (same language, compiled, not a program)."""
    return other.lang == snippet.lang and other.mode in ("compile", "run") and not other.defines_main


def _resolve_chain(snippet: Snippet, attrs: Attributes, earlier: list[Snippet]) -> str | None:
    """Fill `snippet.chain` from `uses=` and `chain`; returns an error message or None."""
    chosen: set[int] = set()
    by_name = {s.name: s for s in earlier if s.name}
    for name in attrs.uses:
        other = by_name.get(name)
        if other is None:
            return f"uses={name}: no earlier block on this page has id={name}"
        if other.lang != snippet.lang:
            return f"uses={name}: that block is {other.lang}, this one is {snippet.lang}"
        if other.mode in ("sketch", "fragment", "compile_fail", "error"):
            return f"uses={name}: that block is a {other.mode} block and cannot be built upon"
        chosen.add(other.index)
        chosen.update(int(part.snippet_id.rsplit(":", 1)[1]) for part in other.chain)
    if attrs.chain:
        for other in earlier:
            if _chain_eligible(snippet, other):
                chosen.add(other.index)
                chosen.update(int(part.snippet_id.rsplit(":", 1)[1]) for part in other.chain)
    by_index = {s.index: s for s in earlier}
    snippet.chain = [
        ChainPart(snippet_id=by_index[i].id, first_line=by_index[i].first_line, source=by_index[i].full_source)
        for i in sorted(chosen)
    ]
    return None
