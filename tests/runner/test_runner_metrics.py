"""The metrics descriptor: a program's measurements reach the record through a pipe of their own,
never through standard output, and only once they pass validation (size, shape, the H200 roofline)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runner.metrics import MAX_METRICS_BYTES, METRICS_FD_ENV, MetricsPipe, validate_metrics
from runner.sandbox import ISOLATION_BWRAP, ISOLATION_NONE, isolation_problem, run_process

GOOD = {
    "harness": "kw_measure/1",
    "name": "t",
    "gpu": {"name": "NVIDIA H200", "sm_count": 132},
    "clocks": {"nvml": True, "sm_mhz_min": 1980, "sm_mhz_max": 1980},
    "metrics": {"copy_bw": {"value": 4.1e12, "unit": "B/s", "ci_low": 4.0e12, "ci_high": 4.2e12, "n": 31, "bound": "hbm"}},
    "guard_failures": 0,
}


def _levels() -> list[str]:
    return [ISOLATION_NONE] + ([ISOLATION_BWRAP] if isolation_problem(ISOLATION_BWRAP) is None else [])


def _run(tmp_path: Path, program: str, isolation: str) -> tuple[dict | None, str | None, str]:
    with MetricsPipe() as pipe:
        res = run_process(
            [sys.executable, "-c", program], tmp_path, 30, isolation=isolation, extra_env=pipe.env(), extra_fds=(pipe.child_fd,)
        )
    doc, problem = pipe.document()
    return doc, problem, res.stdout.text


@pytest.mark.parametrize("isolation", _levels())
def test_a_document_written_on_the_descriptor_is_read_back(tmp_path: Path, isolation: str) -> None:
    program = f"import os; fd = int(os.environ['{METRICS_FD_ENV}']); os.write(fd, {json.dumps(json.dumps(GOOD))}.encode())"
    doc, problem, _ = _run(tmp_path, program, isolation)
    assert problem is None
    assert doc is not None and doc["metrics"]["copy_bw"]["value"] == 4.1e12


def test_json_printed_on_stdout_is_never_taken_as_metrics(tmp_path: Path) -> None:
    program = f"print({json.dumps(json.dumps(GOOD))})"
    doc, problem, stdout = _run(tmp_path, program, ISOLATION_NONE)
    assert (doc, problem) == (None, None)
    assert "copy_bw" in stdout


def test_a_document_over_the_size_cap_is_rejected_and_the_writer_does_not_hang(tmp_path: Path) -> None:
    program = f"import os; fd = int(os.environ['{METRICS_FD_ENV}']); os.write(fd, b'x' * {4 * MAX_METRICS_BYTES}); print('done')"
    doc, problem, stdout = _run(tmp_path, program, ISOLATION_NONE)
    assert doc is None and problem is not None and "more than" in problem
    assert "done" in stdout


def test_a_rate_faster_than_the_h200_peak_is_impossible() -> None:
    bad = json.loads(json.dumps(GOOD))
    bad["metrics"]["copy_bw"]["value"] = 9.6e12  # twice the HBM3e datasheet figure
    doc, problem = validate_metrics(json.dumps(bad).encode())
    assert doc is None and problem is not None and "peak" in problem
    # the same number on a GPU whose peak the runner does not know is kept
    bad["gpu"]["name"] = "Some GPU"
    doc, problem = validate_metrics(json.dumps(bad).encode())
    assert problem is None and doc is not None


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda d: d.update(metrics={}), "no 'metrics'"),
        (lambda d: d["metrics"].update({"Bad Name": {"value": 1}}), "bad metric name"),
        (lambda d: d["metrics"]["copy_bw"].update(value="fast"), "numeric"),
        (lambda d: d["metrics"]["copy_bw"].update(extra={"nested": 1}), "plain value"),
        (lambda d: d["gpu"].update(name="x" * 500), "plain value"),
        (lambda d: d["metrics"].update({f"m{i}": {"value": i} for i in range(40)}), "more than"),
    ],
)
def test_malformed_documents_are_rejected_with_a_reason(mutate, why: str) -> None:  # noqa: ANN001
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    kept, problem = validate_metrics(json.dumps(doc).encode())
    assert kept is None and problem is not None and why in problem


def test_non_finite_numbers_and_non_json_are_rejected() -> None:
    assert validate_metrics(b'{"metrics": {"a": {"value": NaN}}}')[1] is not None
    assert validate_metrics(b"\xff\xfe")[1] is not None
    assert validate_metrics(b"[1, 2]")[1] == "metrics: not a JSON object"
