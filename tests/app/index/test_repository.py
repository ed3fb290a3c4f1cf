"""A wiki in the KernelWiki repository layout: page folders, files that are not pages, the schema as data, types from folders.

tests/fixtures/kwrepo is a repository written for these tests, with deliberate schema violations:
PR-9 is merged without merge_sha and names the family 'blackwell' (not in its tags file); demo-benchmarks
is a doc with a blog's category; barrier-notes lacks the hw- prefix; copy-kernel has no performance_claims,
an unknown tag and a reproducibility below its type's minimum.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from app.index.build import reindex
from app.index.db import make_engine
from app.index.pages import load_wiki
from snippets.repository import (
    ALIAS_BY_ID,
    ALIAS_NAMED,
    condition_holds,
    open_repository,
    page_files,
    type_from_folder,
)

REPO = Path(__file__).resolve().parents[2] / "fixtures" / "kwrepo"

EXPECTED_ERRORS = {
    ("sources/docs/demo-benchmarks.md", "source_category 'benchmark-blog' is not allowed for type 'source-doc'"),
    ("sources/prs/demo-lib/PR-9.md", "'merge_sha' is required when status == merged"),
    ("sources/prs/demo-lib/PR-9.md", "architectures 'blackwell' is not in data/tags.yaml"),
    ("wiki/hardware/barrier-notes.md", "id 'barrier-notes' must start with 'hw-'"),
    ("wiki/kernels/copy-kernel.md", "missing required field 'performance_claims' for type 'wiki-kernel'"),
    ("wiki/kernels/copy-kernel.md", "tag 'not-a-known-tag' is not in data/tags.yaml"),
    ("wiki/kernels/copy-kernel.md", "reproducibility 'concept' is below the minimum 'snippet'"),
}


def test_repository_root_reads_its_page_folders_and_skips_what_is_not_a_page() -> None:
    repo = open_repository(REPO)
    assert repo.page_folders == ["wiki", "sources"] and repo.schema_file == "data/schemas.yaml"
    files, skipped = page_files(repo)
    rels = [rel for rel, _ in files]
    assert len(rels) == 14 and all(r.startswith(("wiki/", "sources/")) for r in rels)
    assert not any(r.startswith("queries/") or r == "README.md" for r in rels)
    assert {d.path: d.severity for d in skipped} == {
        "wiki/kernels/README.md": "info",
        "wiki/kernels/skills/tuning/SKILL.md": "info",
        "wiki/kernels/skills/tuning/references/notes.md": "info",
        "wiki/templates/page.md": "info",
    }


def test_lint_checks_each_page_against_its_types_schema_and_the_vocabulary() -> None:
    wiki = load_wiki(REPO)
    assert len(wiki.pages) == 14
    errors = {(d.path, d.message) for d in wiki.diagnostics if d.severity == "error"}
    assert len(errors) == len(EXPECTED_ERRORS)
    for path, fragment in EXPECTED_ERRORS:
        assert any(p == path and fragment in m for p, m in errors), (path, fragment)
    # sources: links to source-pr/source-blog pages are links to sources (no "is a 'concept' page" warning)
    assert not any("not a 'source'" in d.message for d in wiki.diagnostics)


def test_types_come_from_folders_for_pages_that_declare_none() -> None:
    wiki = load_wiki(REPO)
    assert wiki.pages["pr-demo-lib-7"].type == "source-pr"
    assert wiki.pages["pr-Demo-Lib-9"].type == "source-pr"  # ids with capitals are accepted
    assert wiki.pages["doc-demo-isa"].type == "source-doc"
    assert wiki.pages["blog-demo-pipeline"].type == "source-blog"
    assert wiki.pages["contest-demo-p1"].type == "source-contest"
    assert wiki.pages["kernel-copy"].type == "kernel"
    assert wiki.pages["pr-Demo-Lib-9"].families == ["blackwell"] and wiki.pages["pr-Demo-Lib-9"].architectures == []
    assert type_from_folder("sources/misc/x.md") == "source" and type_from_folder("wiki/x.md") is None


def test_a_plain_folder_uses_the_builtin_schema_in_the_same_format(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nid: a\ntitle: A\ntype: hardware\nconfidence: certain\n---\n")
    wiki = load_wiki(tmp_path)
    assert wiki.repository is not None and wiki.repository.schema_file == "built-in schema"
    assert [d.message for d in wiki.diagnostics] == ["confidence 'certain' is not in built-in vocabulary (confidence)"]


def test_page_folders_are_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(REPO, tmp_path / "r")
    monkeypatch.setenv("KERNELWIKI_PAGE_FOLDERS", "sources")
    files, _ = page_files(open_repository(tmp_path / "r"))
    assert {rel.split("/")[0] for rel, _ in files} == {"sources"} and len(files) == 6


@pytest.mark.parametrize(
    ("expr", "data", "holds"),
    [
        ("status == merged", {"status": "merged"}, True),
        ("status == merged", {"status": "open"}, False),
        ("submission_truth != unavailable", {"submission_truth": "unavailable"}, False),
        ("mode in [verbatim, extracted] and upstream_sha present", {"mode": "verbatim", "upstream_sha": "ab"}, True),
        ("mode in [verbatim, extracted] and upstream_sha present", {"mode": "verbatim"}, False),
        ("claim_valid_for contains 'dev'", {}, None),
    ],
)
def test_required_when_conditions(expr: str, data: dict[str, str], holds: bool | None) -> None:
    assert condition_holds(expr, data) is holds


def test_index_serves_every_page_as_it_is_with_global_aliases_merged(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'i.db'}")
    from app.index.db import create_schema

    create_schema(engine)
    report = reindex(engine, REPO)
    assert len(report.added) == 14 and report.failed == [] and len(report.skipped) == 4
    with engine.connect() as conn:
        aliases = {a for (a,) in conn.execute(text("SELECT alias FROM alias WHERE page_id = 'hw-bulk-copy'"))}
        types = dict(conn.execute(text("SELECT id, type FROM page")).all())
    engine.dispose()
    # the page's own alias TMA is one of data/aliases.yaml's names for the term 'tma': the term and its other names join
    assert aliases == {"TMA", "cp.async.bulk.tensor", "bulk tensor copy"}  # "tma" is "TMA" in another case
    assert types["pr-demo-lib-7"] == "source-pr" and types["lang-cute-dsl"] == "language"


@pytest.mark.parametrize(
    ("page_id", "page_type", "title", "own", "merged"),
    [
        # its own aliases name the term (any case): the names it lacks join, held as named ("TMA" is its "tma")
        ("hw-bulk-copy", "hardware", "Bulk tensor copies", ["tma"], [("bulk tensor copy", ALIAS_NAMED)]),
        # its title names one of the term's names
        ("technique-x", "technique", "Bulk tensor copy", [], [("bulk tensor copy", ALIAS_NAMED), ("TMA", ALIAS_NAMED)]),
        # its id is the type's id_prefix (data/schemas.yaml) and the term
        ("hw-tma", "hardware", "Copies", [], [("bulk tensor copy", ALIAS_BY_ID), ("TMA", ALIAS_BY_ID)]),
        ("hw-sm90", "hardware", "Hopper", ["H200"], [("sm90", ALIAS_NAMED)]),  # named and its id: held as named, the stronger
        # the term only ends a longer id, whatever the prefix: nothing
        ("migration-wgmma-to-tcgen05", "migration", "From wgmma", [], []),
        ("hw-copy-tma", "hardware", "Copies", [], []),
        # a prefix that is not the type's declared one: nothing
        ("technique-tma", "hardware", "Copies", [], []),
        # source pages take none, even named or with a short prefix
        ("doc-tma", "source-doc", "TMA", ["TMA"], []),
        ("doc-cuda-13-0-2-tma", "source-doc", "CUDA", [], []),
    ],
)
def test_a_global_term_goes_to_the_pages_that_name_it_or_whose_short_id_it_is(
    page_id: str, page_type: str, title: str, own: list[str], merged: list[tuple[str, int]]
) -> None:
    repo = open_repository(REPO)  # tma: ["bulk tensor copy", TMA]; tcgen05; sm90: [H200]
    assert repo.aliases_for(page_id, page_type, title, own) == merged


def test_without_a_declared_id_prefix_the_short_type_prefixes_name_a_term(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "aliases.yaml").write_text("tmem: [TMEM, tensor memory]\n")
    repo = open_repository(tmp_path)  # the built-in schema: no id_prefix
    assert repo.aliases_for("hw-tmem", "hardware", "T", []) == [("TMEM", ALIAS_BY_ID), ("tensor memory", ALIAS_BY_ID)]
    assert repo.aliases_for("tmem", "concept", "T", []) == [("tensor memory", ALIAS_BY_ID)]  # the id is the term
    assert repo.aliases_for("notes-tmem", "concept", "T", []) == []
    assert repo.aliases_for("hw-tmem", "source", "T", []) == []


def test_lint_checks_reproducibility_against_blocks_and_evidence() -> None:
    from app.evidence.reproducibility import lint_reproducibility
    from snippets.extract import extract_snippets

    wiki = load_wiki(REPO)
    snippets = {p.id: extract_snippets(p.id, p.path, p.body, p.body_line, p.architectures)[0] for p in wiki.pages.values()}
    found = {d.path: d.message for d in lint_reproducibility(wiki.pages.values(), snippets, [])}
    assert found == {
        "wiki/hardware/bulk-copy.md": "reproducibility claims more than the page shows: 'runnable', but 1 program(s), "
        "none ran and passed on a declared target",
        "wiki/kernels/tiled-reduction.md": "reproducibility claims more than the page shows: 'runnable', but no block is "
        "a program (none defines main) on a declared target",
    }


REPRODUCIBILITY_PAGES = {
    "shell.md": ("snippet", "A build line.\n\n```bash\nmake\n```\n"),
    "unlabelled.md": ("snippet", "```\nstep 1\n```\n"),
    "prose.md": ("snippet", "Only prose, and an indented block:\n\n    not fenced\n"),
    "shell-runnable.md": ("runnable", "```bash\nmake\n```\n\n~~~text\nOK\n~~~\n"),
}


def test_reproducibility_snippet_is_any_fenced_block_as_kernelwiki_s_schema_defines_it(tmp_path: Path) -> None:
    """KernelWiki's references/schema.md: `snippet` is fenced code its validator does not compile, so a ```bash block
    backs it; before, lint said "the page has no code block" of a page whose only block was bash. `runnable` needs
    a program kernelwiki ran, so a page with no block in a language it builds is told which languages it found."""
    from app.evidence.reproducibility import lint_reproducibility
    from snippets.extract import extract_snippets

    for name, (level, body) in REPRODUCIBILITY_PAGES.items():
        stem = name.removesuffix(".md")
        front = f"---\nid: {stem}\ntitle: {stem}\ntype: technique\nreproducibility: {level}\n---\n"
        (tmp_path / name).write_text(front + body, encoding="utf-8")
    wiki = load_wiki(tmp_path)
    snippets = {p.id: extract_snippets(p.id, p.path, p.body, p.body_line, p.architectures)[0] for p in wiki.pages.values()}
    found = {
        d.path: d.message.removeprefix("reproducibility claims more than the page shows: ")
        for d in lint_reproducibility(wiki.pages.values(), snippets, [])
    }
    assert found == {
        "prose.md": "'snippet', but the page has no fenced code block",
        "shell-runnable.md": "'runnable', but the page has no code block in a language kernelwiki builds or runs "
        "(cuda, cpp, ptx, python; found: bash, text)",
    }


def test_performance_claims_are_read_with_their_problems() -> None:
    from app.index.perf import read_claims
    from snippets.page import parse_page

    page, _ = parse_page(
        b"---\nid: k\ntitle: K\nperformance_claims:\n  - {gpu: H200, metric: TFLOPS, value: '1,200'}\n"
        b"  - {gpu: B200, value: fast}\n  - just text\n---\n",
        "k.md",
    )
    assert page is not None
    claims, problems = read_claims(page)
    assert [(c.gpu, c.metric, c.value) for c in claims] == [("H200", "TFLOPS", 1200.0), ("B200", None, None)]
    assert [p.message for p in problems] == [
        "performance_claims item 2 has no metric",
        "performance_claims item 2: value 'fast' is not a number",
        "performance_claims item 3 is not a mapping; ignored",
    ]


def test_views_are_kept_per_app_until_the_index_changes(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from app.index.db import create_schema
    from app.index.repository_queries import cached_view

    repo = Path(shutil.copytree(REPO, tmp_path / "repo"))
    engine = make_engine(f"sqlite:///{tmp_path / 'i.db'}")
    create_schema(engine)
    reindex(engine, repo)
    state = SimpleNamespace()
    with engine.connect() as conn:
        first = cached_view(state, conn, "by-technique")
        assert cached_view(state, conn, "by-technique") is first  # same generation: not rebuilt
    page = repo / "sources/prs/demo-lib/PR-7.md"
    page.write_text(page.read_text().replace("techniques: [pipelining]", "techniques: [pipelining, tile-scheduling]"))
    reindex(engine, repo)
    with engine.connect() as conn:
        after = cached_view(state, conn, "by-technique")
        assert cached_view(SimpleNamespace(), conn, "by-technique") == after  # another app builds the same answer
    engine.dispose()
    groups = {g["value"]: [p["id"] for p in g["pages"]] for g in after["groups"]}
    assert groups["tile-scheduling"] == ["pr-demo-lib-7"] and "tile-scheduling" not in {g["value"] for g in first["groups"]}


def test_a_change_to_the_data_files_reindexes_the_pages_that_depend_on_them(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.index import build
    from app.index.db import create_schema

    root = Path(shutil.copytree(REPO, tmp_path / "repo"))
    engine = make_engine(db_url)
    create_schema(engine)

    def aliases() -> set[str]:
        with engine.connect() as conn:
            return {a for (a,) in conn.execute(text("SELECT alias FROM alias WHERE page_id = 'hw-bulk-copy'"))}

    try:
        first = reindex(engine, root)
        assert "bulk tensor copy" in aliases() and len(first.added) == 14
        again = reindex(engine, root)  # nothing changed: nothing reparsed
        assert again.updated == [] and again.added == [] and again.unchanged == 14
        aliases_file = root / "data" / "aliases.yaml"
        aliases_file.write_text(aliases_file.read_text().replace('"bulk tensor copy"', '"async tile mover"'))
        changed = reindex(engine, root)  # no page file changed, but the registry did: every page again
        assert len(changed.updated) == 14 and changed.failed == []
        assert "async tile mover" in aliases() and "bulk tensor copy" not in aliases()
        assert reindex(engine, root).updated == []
        aliases_file.unlink()  # without the registry only the page's own aliases stay
        assert len(reindex(engine, root).updated) == 14
        assert aliases() == {"TMA", "cp.async.bulk.tensor"}
        monkeypatch.setattr(build, "ROWS_VERSION", build.ROWS_VERSION + 1)  # a version whose rows differ for the same files
        assert len(reindex(engine, root).updated) == 14 and reindex(engine, root).updated == []
    finally:
        engine.dispose()
