"""The matrix in SQL (app/evidence/matrix_cells.py): loading the committed file, newest observation wins, bad lines named."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from app.evidence.matrix_cells import MATRIX_FILE, all_cells, export_cells, generation, load_matrix_file, store_cells
from runner.matrix import MatrixCell, read_cells, write_cells

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_the_file_loads_once_and_what_left_it_leaves_the_table(store: Any, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    shutil.copytree(FIXTURES / "matrix_evidence", evidence)
    cells = read_cells(evidence / MATRIX_FILE)
    first = load_matrix_file(store.engine, evidence)
    assert (first.inserted, first.replaced, first.removed, first.errors) == (len(cells), 0, 0, [])
    with store.engine.connect() as conn:
        assert [c.to_dict() for c in all_cells(conn)] == [c.to_dict() for c in cells]  # the file's cells, as read from it
        gen = generation(conn)
    again = load_matrix_file(store.engine, evidence)
    assert (again.inserted, again.replaced, again.kept) == (0, 0, len(cells))
    with store.engine.connect() as conn:
        assert generation(conn) == gen  # nothing changed: readers keep their cache
    write_cells(evidence / MATRIX_FILE, cells[1:])
    shrunk = load_matrix_file(store.engine, evidence)
    assert shrunk.removed == 1
    with store.engine.connect() as conn:
        assert len(all_cells(conn)) == len(cells) - 1 and generation(conn) > gen


def test_a_posted_cell_outlives_the_file_until_a_newer_observation(store: Any, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    old = MatrixCell(
        "p:1", "p", "sm_90a", "13.0", "nvcc 13.0.88", "h", "compile", "cuda", "pass", timestamp="2026-12-01T00:00:00Z"
    )
    write_cells(evidence / MATRIX_FILE, [old])
    load_matrix_file(store.engine, evidence)
    newer = MatrixCell(
        "p:1", "p", "sm_90a", "13.0", "nvcc 13.0.88", "h", "compile", "cuda", "fail", timestamp="2026-12-02T00:00:00Z"
    )
    with store.engine.begin() as conn:
        assert store_cells(conn, [newer], "request", "F").replaced == 1
    assert load_matrix_file(store.engine, evidence).kept == 1  # the file's older cell does not come back
    write_cells(evidence / MATRIX_FILE, [])
    assert load_matrix_file(store.engine, evidence).removed == 0  # a posted cell is not the file's to remove
    with store.engine.connect() as conn:
        assert [c.status for c in all_cells(conn)] == ["fail"]


def test_exported_cells_keep_what_workers_posted_with_the_committed_file(store: Any, tmp_path: Path) -> None:
    """`kernelwiki evidence export --matrix evidence/matrix/cells.jsonl`: the file then holds the committed cells and
    the posted ones (the newer of each), and loading it again changes nothing."""
    evidence = tmp_path / "evidence"
    shutil.copytree(FIXTURES / "matrix_evidence", evidence)
    committed = read_cells(evidence / MATRIX_FILE)
    load_matrix_file(store.engine, evidence)
    posted = MatrixCell(
        "p:1", "p", "sm_90a", "13.9", "nvcc 13.9.1", "h", "compile", "cuda", "pass", timestamp="2026-12-04T00:00:00Z"
    )
    newer = MatrixCell(**{**committed[0].to_dict(), "status": "fail", "timestamp": "2099-01-01T00:00:00Z"})
    with store.engine.begin() as conn:
        store_cells(conn, [posted, newer], "request", "F")
    assert export_cells(store.engine, evidence / MATRIX_FILE) == len(committed) + 1
    written = {(c.snippet_id, c.target, c.release): c.to_dict() for c in read_cells(evidence / MATRIX_FILE)}
    assert written[("p:1", "sm_90a", "13.9")] == posted.to_dict()
    assert written[(committed[0].snippet_id, committed[0].target, committed[0].release)] == newer.to_dict()
    assert all(written[(c.snippet_id, c.target, c.release)] == c.to_dict() for c in committed[1:])
    again = load_matrix_file(store.engine, evidence)
    assert (again.inserted, again.replaced, again.removed) == (0, 0, 0)


def test_a_bad_line_is_named_and_nothing_of_the_file_is_loaded(store: Any, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    (evidence / "matrix").mkdir(parents=True)
    (evidence / MATRIX_FILE).write_text('{"snippet_id": "p:1"}\nnot json\n', encoding="utf-8")
    result = store.evidence.load_dir(evidence)  # with the evidence, as `kernelwiki index` and the service's start do
    assert len(result.errors) == 1 and result.errors[0].startswith(f"{evidence / MATRIX_FILE}:1: error: not a matrix cell")
    with store.engine.connect() as conn:
        assert all_cells(conn) == []
