"""Markdown for agents over real HTTP: /llms.txt, /llms-full.txt and /pages/{id}.md."""

from __future__ import annotations

import re
from urllib.parse import quote

import yaml

from tests.app.hostile_input import HOSTILE

LINK = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<url>[^)]+)\): (?P<description>.+)$")


def front_matter(markdown: str) -> dict:
    assert markdown.startswith("---\n"), markdown[:80]
    return yaml.safe_load(markdown.split("---\n", 2)[1])


def test_llms_txt_follows_the_llmstxt_format_with_a_link_per_page_grouped_by_type(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
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


def test_page_markdown_has_front_matter_facts_hidden_lines_left_out_and_evidence_after_each_snippet(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    response = agent_live.get("/pages/agent-demo.md")
    assert response.status_code == 200 and response.headers["content-type"] == "text/markdown; charset=utf-8"
    text = response.text
    facts = front_matter(text)
    assert facts["id"] == "agent-demo" and facts["type"] == "technique" and facts["architectures"] == ["sm90a", "sm100a"]
    assert facts["aliases"] == ["AGENTDEMO"] and facts["related"] == ["hw-tma"] and facts["file"] == "wiki/agent-demo.md"
    # The fixture wiki is a plain folder of pages named wiki/ (as the project's own): its files are wiki/<path>.
    tma = agent_live.get("/pages/hw-tma.md").text
    assert "\nfile: wiki/nvidia/tma.md\n" in tma and agent_live.get("/api/pages/hw-tma").json()["file"] == "wiki/nvidia/tma.md"
    assert "<code>wiki/nvidia/tma.md</code>" in agent_live.get("/wiki/nvidia/tma.md").text
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


def test_page_markdown_route_leaves_the_html_page_route_alone(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    assert agent_live.get("/pages/hw-tma", headers={"accept": "text/html"}).headers["content-type"].startswith("text/html")
    missing = agent_live.get("/pages/nope.md")
    assert missing.status_code == 404 and missing.json()["error"]["detail"] == "no page with id 'nope'"


def test_llms_full_txt_holds_every_page_markdown_without_hidden_lines(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    response = agent_live.get("/llms-full.txt")
    assert response.status_code == 200
    text = response.text
    assert text.startswith("# kernelwiki\n")
    for page_id in ("hw-tma", "hw-tmem", "hw-mbarrier", "doc-ptx-isa", "agent-demo"):
        assert text.count(f"\nid: {page_id}\n") == 1, page_id
        assert agent_live.get(f"/pages/{page_id}.md").text in text
    assert "HIDDEN_SETUP_MACRO" not in text and "hidden_setup_module" not in text


def test_hostile_page_ids_never_answer_5xx(shared_agent_live) -> None:
    agent_live = shared_agent_live  # reads only: one server per backend for the module
    for query in HOSTILE:
        response = agent_live.get("/pages/" + quote(query[:300], safe="") + ".md")
        assert response.status_code in (404, 422), (query[:20], response.status_code)


def _documents(client):  # type: ignore[no-untyped-def]
    return client.server.server.config.app.state.agent_documents


def test_llms_documents_are_rendered_once_per_version_with_a_strong_etag_304_and_head(agent_live) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tests.app.agent_fixtures import agent_records

    assert agent_live.server.server.config.app.state.warm_done.wait(60)
    documents = _documents(agent_live)
    assert documents.renderings == 1  # /llms.txt, by the start-up warm-up (app/main.py): no reader's first request pays
    with ThreadPoolExecutor(4) as pool:  # requests that arrive together wait for one rendering
        answers = list(pool.map(lambda _: agent_live.get("/llms-full.txt"), range(4)))
    assert {a.status_code for a in answers} == {200} and len({a.text for a in answers}) == 1
    assert documents.renderings == 2
    full = answers[0]
    etag = full.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")  # strong
    assert f"{agent_live.server.url}/pages/hw-tma.md" in full.text and "kernelwiki-origin" not in full.text

    again = agent_live.get("/llms-full.txt", headers={"If-None-Match": f'"other", {etag}'})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert agent_live.get("/llms-full.txt", headers={"If-None-Match": f"W/{etag}"}).status_code == 304
    head = agent_live.head("/llms-full.txt")
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == etag
    assert int(head.headers["content-length"]) == len(full.content)
    assert documents.renderings == 2

    # Another Host: the same rendering with that origin put in (no client can make the service render again).
    other = agent_live.get("/llms-full.txt", headers={"Host": "mirror.example:81"})
    assert other.status_code == 200 and "http://mirror.example:81/pages/hw-tma.md" in other.text
    assert other.headers["etag"] != etag and documents.renderings == 2
    assert int(other.headers["content-length"]) == len(other.content) != len(full.content)  # sent in blocks, length known

    index = agent_live.get("/llms.txt")
    index_etag = index.headers["etag"]
    assert agent_live.get("/llms.txt", headers={"If-None-Match": index_etag}).status_code == 304
    assert agent_live.head("/llms.txt").headers["etag"] == index_etag and documents.renderings == 2  # warm already

    # New evidence changes llms-full.txt (it shows evidence) but not llms.txt (it lists pages).
    store = agent_live.server.server.config.app.state.store
    record = {**agent_records(store)[1], "record_id": "agent-demo-rerun", "status": "fail", "message": "exit status 3"}
    assert store.evidence.add([record], origin="test").inserted == 1
    after_post = agent_live.get("/llms-full.txt", headers={"If-None-Match": etag})
    assert after_post.status_code == 200 and after_post.headers["etag"] != etag
    assert agent_live.get("/llms.txt", headers={"If-None-Match": index_etag}).status_code == 304

    # A reindex that changed a page renders both again.
    wiki = agent_live.server.server.config.app.state.settings.wiki
    page = wiki / "nvidia" / "tma.md"
    page.write_text(page.read_text().replace("title: Tensor Memory Accelerator (TMA)", "title: Renamed for the cache test"))
    assert store.reindex(wiki).updated == ["hw-tma"]
    changed = agent_live.get("/llms-full.txt", headers={"If-None-Match": after_post.headers["etag"]})
    assert changed.status_code == 200 and "Renamed for the cache test" in changed.text
    renamed = agent_live.get("/llms.txt", headers={"If-None-Match": index_etag})
    assert renamed.status_code == 200 and "[Renamed for the cache test]" in renamed.text


def test_llms_txt_reads_descriptions_stored_at_indexing_and_works_out_those_of_older_indexes(store) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from app.agents.documents import llms_txt
    from app.index.markdown import description

    with store.engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT id, description FROM page")).all())
        bodies = dict(conn.execute(text("SELECT id, body FROM page")).all())
    assert stored and all(stored[pid] == description(bodies[pid]) for pid in stored)
    assert "The TMA copies tiles between global and shared memory." in stored.values()
    before = "".join(llms_txt(store.pages, "http://x", ()))
    with store.engine.begin() as conn:  # an index from before migration 0010: no stored description
        conn.exec_driver_sql("UPDATE page SET description = NULL")
    assert "".join(llms_txt(store.pages, "http://x", ())) == before
