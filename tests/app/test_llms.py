"""Markdown for agents over real HTTP: /llms.txt, /llms-full.txt and /pages/{id}.md."""

from __future__ import annotations

import re
from urllib.parse import quote

import yaml

from tests.app.test_search import HOSTILE

LINK = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<url>[^)]+)\): (?P<description>.+)$")


def front_matter(markdown: str) -> dict:
    assert markdown.startswith("---\n"), markdown[:80]
    return yaml.safe_load(markdown.split("---\n", 2)[1])


def test_llms_txt_follows_the_llmstxt_format_with_a_link_per_page_grouped_by_type(agent_live) -> None:
    response = agent_live.get("/llms.txt")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    assert lines[0] == "# kernelwiki"
    assert lines[2].startswith("> ") and "Hopper" in lines[2]
    assert "never run" in response.text and "`skipped`" in response.text
    sections: dict[str, list[re.Match[str]]] = {}
    current = None
    for line in lines:
        if line.startswith("## "):
            current = line[3:]
            sections[current] = []
        elif line.startswith("- [") and current is not None:
            match = LINK.match(line)
            assert match, line
            sections[current].append(match)
    assert list(sections) == ["Hardware", "Techniques", "Sources"]
    assert [m["title"] for m in sections["Hardware"]] == ["mbarrier", "Tensor Memory (TMEM)", "Tensor Memory Accelerator (TMA)"]
    assert [m["title"] for m in sections["Techniques"]] == ["Agent demo kernels"]
    assert [m["title"] for m in sections["Sources"]] == ["PTX ISA"]
    tma = sections["Hardware"][2]
    assert tma["url"] == f"{agent_live.server.url}/pages/hw-tma.md"
    assert tma["description"] == "The TMA copies tiles between global and shared memory. [sm90a, sm100a]"
    for match in (m for ms in sections.values() for m in ms):
        page = agent_live.get(match["url"])
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/markdown"), match["url"]


def test_page_markdown_has_front_matter_facts_hidden_lines_left_out_and_evidence_after_each_snippet(agent_live) -> None:
    response = agent_live.get("/pages/agent-demo.md")
    assert response.status_code == 200 and response.headers["content-type"] == "text/markdown; charset=utf-8"
    text = response.text
    facts = front_matter(text)
    assert facts["id"] == "agent-demo" and facts["type"] == "technique" and facts["architectures"] == ["sm90a", "sm100a"]
    assert facts["aliases"] == ["AGENTDEMO"] and facts["related"] == ["hw-tma"] and facts["file"] == "wiki/agent-demo.md"
    assert "1 pass" in facts["evidence"]["sm_90a"] and "1 skipped" in facts["evidence"]["sm_100a"]
    assert "HIDDEN_SETUP_MACRO" not in text and "#include <cstdio>" not in text and "hidden_setup_module" not in text
    assert "__global__ void empty() {}" in text and 'print("visible python line")' in text
    body = text.split("---\n", 2)[2]
    evidence = [line for line in body.splitlines() if line.startswith("> Evidence ")]
    assert len(evidence) == 2
    program, python = evidence
    assert program.startswith("> Evidence agent-demo:1 (cuda, run): ")
    assert "sm_90a: ✓ compiles on sm_90a; ✓ ran on NVIDIA H200" in program
    assert "sm_100a: ✓ compiles on sm_100a; ⏸ not run: no sm_100 device here (never run" in program
    assert python == "> Evidence agent-demo:2 (python, compile): sm_90a: not yet verified · sm_100a: not yet verified"
    # The evidence line follows its block's closing fence.
    lines = body.splitlines()
    assert lines[lines.index(program) - 2] == "```"


def test_page_markdown_route_leaves_the_html_page_route_alone(agent_live) -> None:
    assert agent_live.get("/pages/hw-tma", headers={"accept": "text/html"}).headers["content-type"].startswith("text/html")
    missing = agent_live.get("/pages/nope.md")
    assert missing.status_code == 404 and missing.json()["error"]["detail"] == "no page with id 'nope'"


def test_llms_full_txt_holds_every_page_markdown_without_hidden_lines(agent_live) -> None:
    response = agent_live.get("/llms-full.txt")
    assert response.status_code == 200
    text = response.text
    assert text.startswith("# kernelwiki\n")
    for page_id in ("hw-tma", "hw-tmem", "hw-mbarrier", "doc-ptx-isa", "agent-demo"):
        assert text.count(f"\nid: {page_id}\n") == 1, page_id
        assert agent_live.get(f"/pages/{page_id}.md").text in text
    assert "HIDDEN_SETUP_MACRO" not in text and "hidden_setup_module" not in text


def test_hostile_page_ids_never_answer_5xx(agent_live) -> None:
    for query in HOSTILE:
        response = agent_live.get("/pages/" + quote(query[:300], safe="") + ".md")
        assert response.status_code in (404, 422), (query[:20], response.status_code)
