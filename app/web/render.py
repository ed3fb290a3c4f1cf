"""A page body as the browser shows it: highlighted code, snippet anchors, page links.

The body is rendered by `app.index.markdown.render` (raw HTML escaped, unsafe URLs
refused) with markdown-it render hooks: fences are highlighted with Pygments and
wrapped in a `<figure id="snippet-N">`, links to other pages become /pages/ URLs,
headings go one level down and end in a permalink. The result depends only on the page's content
and the set of pages it can link to, so it is cached; the evidence next to each
block changes independently and is filled in per request: the cached body is a
list of HTML chunks, each followed by the snippet whose evidence goes there.
"""

from __future__ import annotations

import html
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from app.cache import LRU
from app.index.markdown import outline, render
from app.schemas import SnippetPublic

MAX_HIGHLIGHT_CHARS = 200_000  # longer blocks are shown plain
LEXER_NAMES = {"cu": "cuda", "c++": "cpp", "py": "python", "sh": "bash", "shell": "bash"}
_FORMATTER = HtmlFormatter(nowrap=True)


@dataclass(frozen=True)
class Segment:
    """A chunk of body HTML, then (optionally) the id of the snippet whose evidence follows it."""

    html: str
    snippet_id: str | None = None


def compile_lexers() -> None:
    """Import the lexers of the languages the wiki's blocks use, and compile their rules (pygments does both on a
    lexer's first use): `serve --workers N`' zygote calls this once before it forks, so the workers share them."""
    for name in ("cuda", "cpp", "c", "ptx", "python", "bash"):
        try:
            highlight("", get_lexer_by_name(name), _FORMATTER)
        except ClassNotFound:
            continue


def highlight_code(code: str, lang: str, cache: LRU[str]) -> str:
    """Highlighted HTML of a code block (escaped plain text for unknown languages)."""

    def make() -> str:
        name = LEXER_NAMES.get(lang, lang)
        if not name or len(code) > MAX_HIGHLIGHT_CHARS:
            return html.escape(code)
        try:
            lexer = get_lexer_by_name(name, stripnl=False, ensurenl=False)
        except ClassNotFound:
            return html.escape(code)
        return highlight(code, lexer, _FORMATTER)

    return cache.get_or_make((lang, code), make)


def _evidence_slot(snippet_id: str) -> str:
    return f"\x00evidence:{snippet_id}\x00"


def _figure(token: Token, snippet: SnippetPublic | None, cache: LRU[str]) -> str:
    """One code block: caption (language, attributes, permalink), highlighted code, evidence slot."""
    info = token.info.strip()
    lang_word = info.split(maxsplit=1)[0] if info else ""
    attrs = info[len(lang_word) :].strip()
    code = snippet.source if snippet is not None and snippet.source is not None else token.content
    code = code.replace("\x00", "\ufffd")  # NUL separates the cached segments
    lang = snippet.lang if snippet is not None else lang_word.lower()
    body = highlight_code(code, lang, cache)
    label = html.escape(lang_word or "text")
    pre = f'<pre class="hl" tabindex="0"><code>{body}</code></pre>'
    if snippet is None:
        return (
            f'<figure class="code"><figcaption class="code-head"><span class="lang">{label}</span></figcaption>{pre}</figure>\n'
        )
    anchor = f"snippet-{snippet.position}"
    head = (
        f'<figcaption class="code-head"><span class="lang">{label}</span>'
        + (f' <code class="info">{html.escape(attrs)}</code>' if attrs else "")
        + f' <a class="permalink" href="#{anchor}" aria-label="Link to snippet {snippet.position}">#{snippet.position}</a>'
        + "</figcaption>"
    )
    return f'<figure class="code snippet" id="{anchor}">{head}{pre}{_evidence_slot(snippet.id)}</figure>\n'


def link_candidates(href: str, page_path: str) -> tuple[str, str | None, str] | None:
    """What a relative body link may name: (a page id, a wiki file path when it names a .md file, its #fragment),
    or None for a link that leaves the wiki (a scheme, an absolute path, an anchor of this page)."""
    if not href or href.startswith(("#", "/")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href):
        return None
    target, _, frag = html.unescape(href).partition("#")
    path = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), target)) if target.endswith(".md") else None
    return target, path, f"#{frag}" if frag else ""


def link_target(href: str, page_path: str, ids: set[str] | frozenset[str], paths: dict[str, str]) -> str | None:
    """The /pages/ URL a relative body link means (a page id or a .md path), or None."""
    found = link_candidates(href, page_path)
    if found is None:
        return None
    target, path, frag = found
    if target in ids:
        return f"/pages/{target}{frag}"
    if path is not None and path in paths:
        return f"/pages/{paths[path]}{frag}"
    return None


def body_link_candidates(body: str, page_path: str) -> tuple[frozenset[str], frozenset[str]]:
    """The page ids and wiki file paths a body's links may name (`link_candidates` of each link): what a page
    view asks the index about, rather than holding every page's id and path."""
    ids: set[str] = set()
    paths: set[str] = set()
    tokens = outline(body).tokens
    for token in tokens:
        for child in token.children or []:
            if child.type == "link_open":
                found = link_candidates(str(child.attrGet("href") or ""), page_path)
                if found is not None:
                    ids.add(found[0])
                    if found[1] is not None:
                        paths.add(found[1])
    return frozenset(ids), frozenset(paths)


def heading_permalink(level: int, anchor: str) -> tuple[int, str]:
    """Every heading one level down (the page title is the view's only <h1>), with a permalink at its end."""
    return min(level + 1, 6), f'<a class="anchor" href="#{anchor}" aria-hidden="true" tabindex="-1">#</a>'


def render_body(
    body: str,
    body_line: int,
    page_path: str,
    snippets: list[SnippetPublic],
    ids: set[str] | frozenset[str],
    paths: dict[str, str],
    cache: LRU[str],
) -> list[Segment]:
    """Render a page body into segments, each followed by a snippet's evidence slot."""
    by_line = {s.line: s for s in snippets}

    def fence(token: Token, _index: int) -> str:
        line = body_line + (token.map[0] if token.map else 0)
        return _figure(token, by_line.get(line), cache)

    def link(href: str) -> str | None:
        return link_target(href, page_path, ids, paths)

    out = render(body, fence=fence, link=link, heading=heading_permalink).html
    segments: list[Segment] = []
    parts = out.split("\x00")
    # parts: html, "evidence:ID", html, "evidence:ID", ..., html
    for i in range(0, len(parts), 2):
        marker = parts[i + 1] if i + 1 < len(parts) else None
        sid = marker.removeprefix("evidence:") if marker else None
        segments.append(Segment(parts[i], sid))
    return segments


def code_css() -> str:
    """Pygments colours for light and dark themes, scoped to `.hl`."""

    def defs(style: str) -> str:
        # Lexer error tokens get no red box: CUDA and PTX lexers flag valid but rare syntax.
        lines = HtmlFormatter(style=style).get_style_defs(".hl").splitlines()
        return "\n".join(line for line in lines if not line.startswith((".hl .err", "pre {", "td.linenos", "span.linenos")))

    light, dark = defs("default"), defs("github-dark")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def toc_items(toc: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table of contents without the page's own title (level-1 headings when there is one)."""
    levels = [t["level"] for t in toc]
    if levels.count(1) == 1 and levels and levels[0] == 1:
        return toc[1:]
    return toc
