"""A page's description (llms.txt) and its code blocks, found with markdown-it parsers shared per process."""

from __future__ import annotations

import itertools
import random
import re

from markdown_it import MarkdownIt

from app.index.markdown import SHORT_PREFIX, description
from snippets.extract import extract_snippets


def whole_parse_description(body: str, limit: int = 200) -> str:
    """The description as it was worked out before (every inline parsed, the body's first 4,000 characters, then all of it)."""
    parser = MarkdownIt("commonmark").enable("table")
    for text in (body[:4000], body) if len(body) > 4000 else (body,):
        for before, token in itertools.pairwise(parser.parse(text)):
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


FILLER = "\n\n".join(f"## Part {i}\n\n" + "word " * 30 for i in range(8))  # past the short prefix
CASES = [
    # a reference link whose definition lies past the short prefix: the link's text, not its brackets
    "# Title\n\n[the reference link text][r] opens this long first paragraph. Yes.\n\n"
    + FILLER
    + "\n\n[r]: https://example.com\n",
    "[foo] is a reference link that should be rendered as a link text.\n\n" + FILLER + "\n\n[foo]: http://x\n",
    # a fence open across the cut holds no paragraph in either parse
    "## Code\n\n```cuda\n"
    + "int x;\n" * 200
    + "\n\nnot a paragraph, inside the fence\n```\n\nThe first paragraph of prose comes after the long block. Yes.",
    "<div>\nhtml block here is long enough to count\n</div>\n\nThen a paragraph that is long enough. Yes.",
    "Short.\n\nA \\*escaped\\* star and `code` and <b>html</b> and ~~strike~~ text here. More.",
    "| a | b |\n|---|---|\n| table cell text long enough | x |\n\nParagraph with a softbreak\nhere and a hardbreak  \nthere. End.",
    "x" * 5000 + "\n\nlater paragraph that is long enough to be chosen. Yes.",
    "<!--\n" + "comment\n\n" * 200 + "-->\n\nThe paragraph after a long comment block is the one. Yes.",
]


def test_description_is_that_of_parsing_every_inline_of_the_whole_text() -> None:
    rng = random.Random(26)
    parts = ["word", "*em*", "`c`", "\\*", "[l](u)", "[ref]", "<i>", "<div>", "~~s~~", "\n", "\n\n", "  \n", "# H\n",
             "> q\n", "- li\n", "1. x\n", "    indented\n", "```\n", "<!--", "-->", "&amp;", "[ref]: /u\n", "|a|b|\n|-|-|\n",
             "Some longer sentence of prose here.", "---\n", "===\n"]  # fmt: skip
    bodies = CASES + [" ".join(rng.choice(parts) for _ in range(rng.randint(5, 900))) for _ in range(200)]
    assert sum(len(b) > SHORT_PREFIX + 200 for b in bodies) > 80  # many bodies are cut short first
    for body in bodies:
        assert description(body) == whole_parse_description(body), body[:200]
    assert description(CASES[0]) == "the reference link text opens this long first paragraph."
    assert description(CASES[2]) == "The first paragraph of prose comes after the long block."


def test_code_blocks_are_found_by_the_shared_block_parser_wherever_the_page_renders_them() -> None:
    body = (
        "Intro with `inline` code and a [link](u).\n\n"
        "- a list item\n\n  ```cuda\n  __global__ void a() {}\n  ```\n\n"
        "> quoted\n>\n> ```cpp\n> int b() { return 1; }\n> ```\n\n"
        "````markdown\n```cuda\nnot a block: inside a longer fence\n```\n````\n"
    )
    for _ in range(2):  # the parser is made once and shared: a second page finds the same blocks
        snippets, problems = extract_snippets("p", "p.md", body, 5, ["sm90a"])
        assert [(s.lang, s.line) for s in snippets] == [("cuda", 9), ("cpp", 15)]
        assert snippets[0].source == "__global__ void a() {}\n" and not problems
