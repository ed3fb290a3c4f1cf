"""A page parsed once (`outline`): its description (llms.txt) and its code blocks come from the same tokens."""

from __future__ import annotations

import random

from app.index.markdown import description, first_sentence, outline, render
from snippets.extract import extract_snippets

FILLER = "\n\n".join(f"## Part {i}\n\n" + "word " * 30 for i in range(8))
CASES = {
    # a reference link whose definition comes much later: the link's text, not its brackets
    "# Title\n\n[the reference link text][r] opens this long first paragraph. Yes.\n\n"
    + FILLER
    + "\n\n[r]: https://example.com\n": "the reference link text opens this long first paragraph.",
    # a fence holds no paragraph, however long
    "## Code\n\n```cuda\n"
    + "int x;\n" * 200
    + "\n\nnot a paragraph, inside the fence\n```\n\nThe first paragraph of prose comes after the long block. Yes.": (
        "The first paragraph of prose comes after the long block."
    ),
    # raw HTML is text on a page (escaped, never passed through): so in its description
    "<div>\nhtml block here is long enough to count\n</div>\n\nThen a paragraph that is long enough. Yes.": (
        "<div> html block here is long enough to count </div>"
    ),
    # inline markup as the page reads: escapes resolved, code and strike-through without their marks
    "Short.\n\nA \\*escaped\\* star and `code` and <b>html</b> and ~~strike~~ text here. More.": (
        "A *escaped* star and code and <b>html</b> and strike text here."
    ),
    # table cells are not prose; soft and hard breaks are spaces
    "| a | b |\n|---|---|\n| table cell text long enough | x |\n\nParagraph with a softbreak\nhere and a hardbreak  \n"
    "there. End.": "Paragraph with a softbreak here and a hardbreak there.",
    "<!--\n" + "comment\n\n" * 200 + "-->\n\nThe paragraph after a long comment block is the one. Yes.": (
        "The paragraph after a long comment block is the one."
    ),
    "No sentence end but long enough to count " + "word " * 50: ("No sentence end but long enough to count " + "word " * 50)[
        :199
    ].rstrip()
    + "…",
    "# Only a heading\n\n- a list item that is long enough? no, list items count too.\n": ("a list item that is long enough?"),
    "": "",
}


def test_description_is_the_first_sentence_of_the_first_prose_paragraph_as_the_page_renders() -> None:
    for body, expected in CASES.items():
        assert description(body) == expected, body[:120]
        assert first_sentence(outline(body).tokens) == expected  # what the index stores, from its one parse


PARTS = ["word", "*em*", "`c`", "[l](u)", "<div>", "\n", "\n\n", "  \n", "# H\n", "> ", "- ", "1. ", "    ",
         "```cuda\n__global__ void k() {}\n```\n", "~~~cpp flags=-O2\nint f();\n~~~\n", "````\n", "```\n",
         "| a | b |\n|---|---|\n", "|", "```cuda x|y\n", "<!--", "-->", "Some longer sentence of prose here."]  # fmt: skip


def test_code_blocks_from_the_index_parse_are_those_the_runner_finds_on_its_own() -> None:
    """The index extracts blocks from its one parse of a page (tables, strike-through, inline on); the runner
    and `kernelwiki snippets` parse blocks only. Both must number the same blocks at the same lines, or the
    evidence of one would be filed under another's id."""
    rng = random.Random(26)
    bodies = [" ".join(rng.choice(PARTS) for _ in range(rng.randint(5, 400))) for _ in range(400)]
    found = 0
    for body in bodies:
        alone, alone_problems = extract_snippets("p", "p.md", body, 3, ["sm90a"])
        shared, shared_problems = extract_snippets("p", "p.md", body, 3, ["sm90a"], tokens=outline(body).tokens)
        assert [s.to_dict() for s in shared] == [s.to_dict() for s in alone], body[:200]
        assert shared_problems == alone_problems
        found += len(alone)
    assert found > 500  # the bodies hold many blocks, in lists, quotes and beside tables


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
    html = render(body).html  # and the page renders each as a code block
    assert html.count('<code class="language-cuda">') == 1 and html.count('<code class="language-cpp">') == 1
