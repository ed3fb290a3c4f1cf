"""EvidenceIn keeps what makes a record reproducible and honest: the exact command and the compiler warnings."""

from __future__ import annotations

from typing import Any

from app.evidence.ingest import COMMAND_MAX_BYTES, parse_record
from runner.status import RECORD_STATUSES


def _record(**over: Any) -> dict[str, Any]:
    base = {
        "record_id": "abc123",
        "snippet_id": "hw-setmaxnreg:1",
        "page_id": "hw-setmaxnreg",
        "target": "sm_90a",
        "step": "compile",
        "status": "pass",
        "content_hash": "h",
        "timestamp": "2026-12-02T16:00:00Z",
        "command": "nvcc -gencode=arch=compute_90a,code=sm_90a -rdc=true snippet.cu -c -o snippet.o",
        "warnings": ["ptxas warning (C7504) Potential Performance Loss: 'setmaxnreg' ignored [-rdc build]"],
    }
    return base | over


def test_command_and_warnings_survive_parsing_into_the_stored_record() -> None:
    parsed, error = parse_record(_record())
    assert error is None and parsed is not None
    stored = parsed.to_record()
    assert stored["command"].startswith("nvcc -gencode=arch=compute_90a,code=sm_90a")
    assert stored["warnings"] == ["ptxas warning (C7504) Potential Performance Loss: 'setmaxnreg' ignored [-rdc build]"]


def test_an_overlong_command_is_refused_naming_the_field() -> None:
    parsed, error = parse_record(_record(command="x" * (COMMAND_MAX_BYTES + 1)))
    assert parsed is None and error is not None and "'command'" in error


def test_status_and_step_come_from_the_runners_vocabulary() -> None:
    for status in RECORD_STATUSES:
        assert parse_record(_record(status=status))[1] is None
    _, error = parse_record(_record(status="passed"))
    assert error is not None and "'status'" in error and "unverified" in error
    _, error = parse_record(_record(step="link"))
    assert error is not None and "'step'" in error
