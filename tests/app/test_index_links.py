"""Files and folders linked into the wiki from outside are never indexed, and lint names them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli

SECRET = "---\nid: secret\ntitle: Secret\ntype: concept\n---\n# Secret\n\nclassified okapi words\n"


def test_links_leaving_the_wiki_are_skipped_and_named(store, wiki_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    (outside / "nested.md").write_text(SECRET.replace("id: secret", "id: nested"))
    (wiki_dir / "secret.md").symlink_to(outside / "secret.md")
    (wiki_dir / "elsewhere").symlink_to(outside, target_is_directory=True)
    (wiki_dir / "inner").mkdir()
    (wiki_dir / "inner" / "same.md").symlink_to(wiki_dir / "ptx.md")  # a link that stays inside is fine

    report = store.reindex(wiki_dir)
    warnings = {d.path: d.message for d in report.diagnostics if d.severity == "warning"}
    assert "links outside the wiki folder" in warnings["secret.md"] and str(outside / "secret.md") in warnings["secret.md"]
    assert "folder links outside" in warnings["elsewhere"]
    assert store.search("okapi", __import__("app.store", fromlist=["Filters"]).Filters()).total == 0
    assert store.get_page("secret") is None and store.get_page("nested") is None

    result = CliRunner().invoke(cli, ["lint", "--wiki", str(wiki_dir)])
    assert "secret.md:1: warning: this file links outside the wiki folder" in result.output
    assert "elsewhere:1: warning: this folder links outside the wiki folder" in result.output
