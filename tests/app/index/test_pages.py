"""Front matter: every field, every spelling, and a corpus of bad pages with their messages."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.index.pages import load_wiki
from snippets.page import parse_page

GOOD = b"""---
id: hw-tma
title: TMA
type: hardware
architectures:
  - sm_90a
  - SM100A
languages: '*'
tags: [memory, "async copy"]
aliases: []
related:
sources: ~
evidence_basis:
  - {source_id: doc-ptx-isa, evidence_type: spec}
reviewed: 2026-11-30
owner: {name: someone}
---
# Body
"""


def test_front_matter_fields_are_parsed_and_normalized() -> None:
    page, diags = parse_page(GOOD, "hw/tma.md")
    assert page is not None and diags == []
    assert page.architectures == ["sm90a", "sm100a"]
    assert page.tags == ["memory", "async copy"]
    assert page.aliases == [] and page.related == [] and page.sources == []
    assert page.languages == ["*"]
    assert page.evidence_basis == [{"source_id": "doc-ptx-isa", "evidence_type": "spec"}]
    assert page.extra == {"reviewed": "2026-11-30", "owner": {"name": "someone"}}
    assert page.body_line == 18 and page.body == "# Body\n"


def test_lone_architecture_string_is_a_one_item_list_with_a_warning() -> None:
    page, diags = parse_page(b"---\nid: a\ntitle: A\narchitectures: sm_90a\n---\n", "a.md")
    assert page is not None and page.architectures == ["sm90a"]
    assert [str(d) for d in diags] == ["a.md:4: warning: 'architectures' should be a list; read 'sm_90a' as a one-item list"]


def test_unknown_type_is_a_warning_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nid: a\ntitle: A\ntype: recipe\n---\n")
    wiki = load_wiki(tmp_path)
    assert "a" in wiki.pages
    [d] = wiki.diagnostics
    assert d.severity == "warning" and "unknown type 'recipe' (built-in schema knows: api," in d.message and d.line == 4


def test_bom_and_crlf_are_accepted() -> None:
    page, diags = parse_page(b"\xef\xbb\xbf---\r\nid: a\r\ntitle: A\r\n---\r\n# H\r\n", "a.md")
    assert page is not None and diags == [] and page.body == "# H\n"


def test_multi_megabyte_page_with_long_lines_is_fine() -> None:
    body = ("x" * 200_000 + "\n") * 15
    started = time.perf_counter()
    page, diags = parse_page(b"---\nid: big\ntitle: Big\n---\n" + body.encode(), "big.md")
    assert page is not None and diags == [] and len(page.body) > 3_000_000
    assert time.perf_counter() - started < 5


BAD = [
    (b"", "a.md:1: error: empty file"),
    (b"   \n\n", "a.md:1: error: empty file"),
    (b"# no front matter\n", "a.md:1: error: missing front matter"),
    (b"---\nid: a\ntitle: A\n", "a.md:1: error: unclosed front matter"),
    (b"---\nid: a\ntitle: [unclosed\n---\n", "a.md:3: error: invalid YAML"),
    (b"---\n- a\n- b\n---\n", "a.md:2: error: front matter must be a mapping"),
    (b"---\n---\n", "a.md:2: error: front matter must be a mapping of keys to values, not empty"),
    (b"---\ntitle: A\n---\n", "a.md:2: error: missing required field 'id'"),
    (b"---\nid: a\n---\n", "a.md:2: error: missing required field 'title'"),
    (b"---\nid: wiki/hw/tma.md\ntitle: A\n---\n", "a.md:2: error: id 'wiki/hw/tma.md' looks like a path"),
    (b"---\nid: ../etc\ntitle: A\n---\n", "a.md:2: error: id '../etc' looks like a path"),
    (b"---\nid: Has Space\ntitle: A\n---\n", "a.md:2: error: id 'Has Space' may hold only"),
    (b"---\nid: a\ntitle: A\narchitectures: [sm90a, sm999]\n---\n", "a.md:4: error: unknown architecture 'sm999'"),
    (b"---\nid: a\ntitle: A\n---\n\xff\xfe bad", "a.md:5: error: not UTF-8"),
    (
        b"---\nid: !!python/object/apply:os.system [echo hi]\ntitle: A\n---\n",
        "a.md:2: error: invalid YAML: could not determine a constructor",
    ),
    (b"---\nid: a\ntitle: A\ntags: !!python/name:os.system\n---\n", "a.md:4: error: invalid YAML"),
]


@pytest.mark.parametrize("raw,expected", BAD, ids=[e.split("error: ")[1][:30] for _, e in BAD])
def test_bad_page_gets_a_clear_error_naming_file_and_line(raw: bytes, expected: str) -> None:
    page, diags = parse_page(raw, "a.md")
    assert page is None
    assert any(str(d).startswith(expected) for d in diags), [str(d) for d in diags]


def test_billion_laughs_is_refused_quickly() -> None:
    lol = ["---", "id: a", "title: A", 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lol += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    raw = ("\n".join(lol) + "\n---\n").encode()
    started = time.perf_counter()
    page, diags = parse_page(raw, "bomb.md")
    assert page is None and "aliases (*name) are not allowed" in diags[0].message
    assert time.perf_counter() - started < 1


def test_wiki_load_reports_duplicates_and_link_problems_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nid: a\ntitle: A\nrelated: [a, missing]\naliases: [X]\n---\n")
    (tmp_path / "b.md").write_text("---\nid: a\ntitle: B\n---\n")
    (tmp_path / "c.md").write_text("---\nid: c\ntitle: C\naliases: [x]\nsources: [a]\n---\n")
    (tmp_path / "d.md").write_bytes(b"\xff")
    wiki = load_wiki(tmp_path)
    assert sorted(wiki.pages) == ["a", "c"]
    text = "\n".join(str(d) for d in wiki.diagnostics)
    assert "b.md:2: error: duplicate id 'a': also used by a.md" in text
    assert "a.md:2: error: duplicate id 'a': also used by b.md" in text
    assert "a.md:4: warning: page lists itself in 'related'" in text
    assert "a.md:4: warning: unresolved related id 'missing'" in text
    assert "c.md:4: warning: alias 'x' is also claimed by a.md (a)" in text
    assert "c.md:5: warning: sources id 'a' is a 'concept' page, not a 'source'" in text
    assert "d.md:1: error: not UTF-8" in text
