"""Markdown → safe HTML with heading anchors, and the page's sections for search.

markdown-it-py renders with raw HTML disabled (it is escaped, never passed
through) and with its link validator, which refuses `javascript:`, `vbscript:`,
`file:` and most `data:` URLs. Headings get stable, unique anchors; the same
anchors are stored with each section so a search hit can deep-link into a page.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

FenceRenderer = Callable[[Token, int], str | None]
"""Optional hook to render a fenced block (token, 0-based fence index) → HTML, or None for the default."""
LinkRewriter = Callable[[str], str | None]
"""Optional hook: a link's href → the href to write instead, or None to keep it."""
HeadingRenderer = Callable[[int, str], tuple[int, str]]
"""Optional hook: a heading's (level, anchor) → (the level to write, HTML to put at its end, e.g. a permalink)."""


@dataclass
class Section:
    """One heading of a page and the text under it (down to the next heading)."""

    position: int  # 0 for the text before the first heading, then 1, 2, ...
    level: int  # heading level 1..6; 0 for the intro
    heading: str  # heading text ("" for the intro)
    anchor: str  # HTML id of the heading ("" for the intro)
    line: int  # 1-based body line of the heading
    text: str  # plain text under the heading, code included


@dataclass
class Rendered:
    """A page body rendered to HTML with its table of contents and sections."""

    html: str
    sections: list[Section] = field(default_factory=list)
    toc: list[dict[str, Any]] = field(default_factory=list)  # [{level, heading, anchor}]


def slugify(text: str) -> str:
    """Heading text → anchor: lowercase words joined by '-', GPU punctuation ('.', '_') kept."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w.\- ]+", "", text)
    text = re.sub(r"[\s-]+", "-", text).strip("-.")
    return text or "section"


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.enable("strikethrough")
    md.add_render_rule("fence", _fence_rule)
    md.add_render_rule("link_open", _link_open_rule)
    md.add_render_rule("heading_open", _heading_rule)
    md.add_render_rule("heading_close", _heading_rule)
    return md


_SHARED: list[MarkdownIt] = []


def _shared_parser() -> MarkdownIt:
    """One parser per process, made on first use (building one costs more than parsing a page).

    Parsing and rendering keep their state in per-call objects and `env`, so threads may share it.
    """
    if not _SHARED:
        _SHARED.append(_parser())
    return _SHARED[0]


def _fence_rule(self: Any, toks: list[Token], idx: int, options: Any, env: Any) -> str:
    """Fenced blocks through the caller's hook (`env["fence"]`), counted per render in `env`."""
    index = env["fence_count"]
    env["fence_count"] = index + 1
    hook = env.get("fence")
    if hook is not None:
        out = hook(toks[idx], index)
        if out is not None:
            return out
    return self.fence(toks, idx, options, env)


def _link_open_rule(self: Any, toks: list[Token], idx: int, options: Any, env: Any) -> str:
    """Links through the caller's hook (`env["link"]`), which may give another href."""
    hook, token = env.get("link"), toks[idx]
    href = token.attrGet("href")
    if hook is not None and href is not None:
        url = hook(str(href))
        if url is not None:
            token.attrSet("href", url)
    return str(self.renderToken(toks, idx, options, env))


def _heading_rule(self: Any, toks: list[Token], idx: int, options: Any, env: Any) -> str:
    """Headings through the caller's hook (`env["heading"]`): another level, and HTML before the closing tag."""
    hook, token = env.get("heading"), toks[idx]
    if hook is None:
        return str(self.renderToken(toks, idx, options, env))
    if token.nesting == 1:
        token.meta["heading"] = hook(int(token.tag[1]), str(token.attrGet("id") or ""))
    level, end = (token if token.nesting == 1 else toks[idx - 2]).meta["heading"]  # heading_open, inline, heading_close
    token.tag = f"h{level}"
    return (end if token.nesting == -1 else "") + str(self.renderToken(toks, idx, options, env))


def _inline_text(token: Token) -> str:
    if token.children is None:
        return token.content
    return "".join(" " if c.type in ("softbreak", "hardbreak") else c.content for c in token.children)


@dataclass
class Outline:
    """A page body parsed once: its tokens (heading anchors set), sections and table of contents."""

    tokens: list[Token]
    sections: list[Section] = field(default_factory=list)
    toc: list[dict[str, Any]] = field(default_factory=list)  # [{level, heading, anchor}]


def outline(body: str) -> Outline:
    """Parse a page body with the shared parser: the tokens every other use reads (HTML, code blocks,
    description), its sections for search and its table of contents."""
    tokens = _shared_parser().parse(body)
    sections: list[Section] = [Section(0, 0, "", "", 1, "")]
    toc: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    texts: list[list[str]] = [[]]
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            title = _inline_text(tokens[i + 1])
            base = slugify(title)
            n = used.get(base, 0)
            used[base] = n + 1
            anchor = base if n == 0 else f"{base}-{n}"
            tok.attrSet("id", anchor)
            level = int(tok.tag[1])
            line = (tok.map[0] + 1) if tok.map else 1
            sections.append(Section(len(sections), level, title, anchor, line, ""))
            texts.append([])
            toc.append({"level": level, "heading": title, "anchor": anchor})
        elif tok.type == "inline" and not (i > 0 and tokens[i - 1].type == "heading_open"):
            texts[-1].append(_inline_text(tok))
        elif tok.type in ("fence", "code_block"):
            texts[-1].append(tok.content)
    for section, parts in zip(sections, texts, strict=True):
        section.text = "\n".join(p for p in parts if p)
    if not sections[0].text and len(sections) > 1:
        sections.pop(0)
    return Outline(tokens, sections, toc)


def render(
    body: str, fence: FenceRenderer | None = None, link: LinkRewriter | None = None, heading: HeadingRenderer | None = None
) -> Rendered:
    """Render a page body; `fence` may replace the HTML of fenced code blocks, `link` the targets of links and
    `heading` the level and end of headings."""
    md = _shared_parser()
    parsed = outline(body)
    html_out = md.renderer.render(parsed.tokens, md.options, {"fence": fence, "fence_count": 0, "link": link, "heading": heading})
    return Rendered(html=html_out, sections=parsed.sections, toc=parsed.toc)


def first_sentence(tokens: list[Token], limit: int = 200) -> str:
    """A page's one-line description from its parsed body (`outline(body).tokens`): the first sentence of its
    first paragraph of prose (at least 20 characters), as the page renders it; "" when it has none.

    Worked out when the page is indexed (`page.description`) from the parse the index makes anyway, so
    llms.txt reads it rather than every page's body.
    """
    for before, token in itertools.pairwise(tokens):
        if before.type != "paragraph_open" or token.type != "inline":
            continue
        words = "".join(" " if c.type in ("softbreak", "hardbreak") else c.content for c in token.children or [])
        words = re.sub(r"\s+", " ", words).strip()
        if len(words) < 20:
            continue
        m = re.match(r"(.+?[.!?])(\s|$)", words)
        sentence = m.group(1) if m else words
        return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"
    return ""


def description(body: str, limit: int = 200) -> str:
    """`first_sentence` of a body not parsed yet (pages indexed before descriptions were stored)."""
    return first_sentence(_shared_parser().parse(body), limit)
