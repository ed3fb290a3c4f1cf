"""What ran where (app/index/run_gpus.py): /llms.txt, /llms-full.txt and the home page say which GPUs ran programs
that passed, per architecture family, from the evidence held, not from text written for one wiki.

Before, /llms.txt said "Programs for SM90 ran on an NVIDIA H200" and the home page that every snippet is compiled
and run on real GPUs, on a wiki whose evidence was compile-only as on one that had run on an H200.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.index.run_gpus import family_of, ran_on_statement, ran_pairs
from tests.conftest import REPO

H200_ONLY = (
    "Programs ran and passed on NVIDIA H200 (Hopper, SM90); no program has passed a run on any other architecture. "
    "No Blackwell (SM100/SM103) GPU has been available: Blackwell programs are compiled but have never run."
)
COMPILE_ONLY = (
    "No program has run on a GPU yet: the evidence is compile-only (no run step has passed), "
    "and no Blackwell (SM100/SM103) program has ever run."
)
TOKEN = {"Authorization": "Bearer test-runner-token"}


def test_a_record_counts_where_it_ran_and_passed_on_a_gpu_it_names() -> None:
    records = [
        ("run", "pass", "sm_90a", "NVIDIA H200", "9.0"),
        ("run", "pass", "sm_90", "NVIDIA H200", None),  # the family from the target when the GPU's capability is not recorded
        ("run", "pass", "any", "NVIDIA H100 80GB HBM3", "9.0"),  # `any`: the GPU's capability says where it ran
        ("run", "fail", "sm_80", "NVIDIA A100", "8.0"),  # did not pass
        ("run", "skipped", "sm_100a", None, None),  # not run: no sm_100 device here
        ("compile", "pass", "sm_100a", "NVIDIA H200", "9.0"),  # compiled, never run
        ("run", "pass", "sm_100a", None, None),  # names no GPU: proves no run on a Blackwell one
        ("run", "pass", "sm_100a", "   ", "10.0"),
    ]
    assert ran_pairs(records) == {("Hopper", "NVIDIA H200"), ("Hopper", "NVIDIA H100 80GB HBM3")}
    assert ran_pairs([("run", "pass", "sm_100a", "NVIDIA B200", "10.0")]) == {("Blackwell", "NVIDIA B200")}
    assert ran_pairs([("run", "pass", "sm_100a", "NVIDIA H200", "9.0")]) == {("Hopper", "NVIDIA H200")}  # the GPU's family
    assert [family_of(t, cc) for t, cc in [("sm_89", None), ("sm_86", None), ("sm_120a", None), ("any", None)]] == [
        "Ada",
        "Ampere",
        "Blackwell",
        "",
    ]
    assert ran_on_statement(()) == COMPILE_ONLY
    assert ran_on_statement((("Hopper", ("NVIDIA H200",)),)) == H200_ONLY
    both = ran_on_statement((("Blackwell", ("NVIDIA B200",)), ("Hopper", ("NVIDIA H100", "NVIDIA H200"))))
    assert both == (
        "Programs ran and passed on NVIDIA B200 (Blackwell, SM100/SM103) and NVIDIA H100 and NVIDIA H200 (Hopper, SM90); "
        "no program has passed a run on any other architecture."
    )


def _statement_line(llms: str) -> str:
    return llms.splitlines()[4]  # "# kernelwiki", "", "> summary", "", what ran where


def test_with_the_fixture_evidence_the_documents_and_home_name_the_h200_and_blackwell_as_never_run(shared_agent_live) -> None:  # noqa: ANN001
    live = shared_agent_live  # reads only: the fixture wiki with its evidence (an H200 run of agent-demo:1, sm_100a skipped)
    assert _statement_line(live.get("/llms.txt").text) == H200_ONLY
    assert H200_ONLY in live.get("/llms-full.txt").text
    assert H200_ONLY in live.get("/", headers={"accept": "text/html"}).text


def test_with_no_evidence_the_documents_and_home_say_the_evidence_is_compile_only(shared_live) -> None:  # noqa: ANN001
    live = shared_live  # reads only: the fixture wiki, no evidence
    llms = live.get("/llms.txt").text
    assert _statement_line(llms) == COMPILE_ONLY and "ran on an NVIDIA H200" not in llms
    assert COMPILE_ONLY in live.get("/llms-full.txt").text
    home = live.get("/", headers={"accept": "text/html"}).text
    assert COMPILE_ONLY in home and "run on real GPUs" not in home


def _post(live: Any, snippet: dict[str, Any], target: str, gpu: str | None, cc: str | None, n: int) -> None:
    record = {
        "record_id": f"ran-on-{n}",
        "snippet_id": snippet["id"],
        "page_id": snippet["page_id"],
        "target": target,
        "step": "run",
        "status": "pass",
        "content_hash": snippet["content_hash"],
        "timestamp": "2026-12-01T00:00:00Z",
        "gpu_name": gpu,
        "compute_capability": cc,
    }
    posted = live.post("/api/evidence", json=[record], headers=TOKEN)
    assert posted.status_code == 200 and posted.json()["inserted"] == 1, posted.text


def test_llms_txt_is_rendered_again_when_a_gpu_first_runs_a_family_and_not_for_a_record_naming_no_gpu(live) -> None:  # noqa: ANN001
    app = live.server.server.config.app
    documents = app.state.agent_documents
    snippet = live.get("/api/snippets", params={"page": "hw-tma", "limit": 1}).json()["snippets"][0]
    assert _statement_line(live.get("/llms.txt").text) == COMPILE_ONLY
    rendered = documents.renderings
    _post(live, snippet, "sm_100a", None, None, 1)  # a run "on sm_100a" that names no GPU: no Blackwell GPU ran it
    assert _statement_line(live.get("/llms.txt").text) == COMPILE_ONLY and documents.renderings == rendered
    _post(live, snippet, "sm_90a", "NVIDIA H200", "9.0", 2)  # the first program run on a Hopper GPU
    assert _statement_line(live.get("/llms.txt").text) == H200_ONLY and documents.renderings == rendered + 1
    _post(live, snippet, "sm_90a", "NVIDIA H200", "9.0", 3)  # the same GPU again: the same words, nothing rendered
    assert _statement_line(live.get("/llms.txt").text) == H200_ONLY and documents.renderings == rendered + 1
    assert H200_ONLY in live.get("/", headers={"accept": "text/html"}).text


def test_the_bundled_wiki_s_committed_evidence_ran_on_an_h200_only(tmp_path: Path) -> None:
    from app.store import Store

    store = Store(f"sqlite:///{tmp_path / 'index.db'}")
    try:
        store.create_schema()
        store.reindex(REPO / "wiki", full_text=False)
        assert store.evidence.load_dir(REPO / "evidence").inserted > 0
        with store.engine.connect() as conn:
            ran = store.evidence.ran_on(conn)
    finally:
        store.engine.dispose()
    assert ran == (("Hopper", ("NVIDIA H200",)),)
    assert ran_on_statement(ran) == H200_ONLY


def test_the_migration_fills_run_gpu_from_the_evidence_stored_before_it(tmp_path: Path) -> None:
    import json

    from app.index.db import make_engine
    from app.index.migrations import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'index.db'}")
    try:
        upgrade(engine, "0014v")
        rows = [
            ("a", "sm_90a", "run", "pass", {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}),
            ("b", "sm_100a", "run", "skipped", {"gpu_name": None}),
            ("c", "sm_100a", "compile", "pass", {"gpu_name": None}),
            ("d", "sm_80", "run", "pass", {"gpu_name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0"}),
        ]
        with engine.begin() as conn:
            for rid, target, step, status, data in rows:
                conn.execute(
                    text(
                        "INSERT INTO evidence (record_id, snippet_id, page_id, target, step, status, content_hash, timestamp, data)"
                        " VALUES (:r, 'p:1', 'p', :t, :s, :st, 'h', '2026-12-01T00:00:00Z', :d)"
                    ),
                    {"r": rid, "t": target, "s": step, "st": status, "d": json.dumps(data)},
                )
        upgrade(engine)
        with engine.connect() as conn:
            held = set(conn.execute(text("SELECT family, gpu_name FROM run_gpu")).all())
    finally:
        engine.dispose()
    assert held == {("Hopper", "NVIDIA H200"), ("Ampere", "NVIDIA A100-SXM4-80GB")}
