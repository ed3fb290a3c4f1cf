"""A well-formed evidence record for the fixture wiki's one snippet (hw-tma:1), for the tests that post or store one."""

from __future__ import annotations

from typing import Any


def tma_record(**change: Any) -> dict[str, Any]:
    """A passing sm_90a compile record of hw-tma:1 (content hash "abc"), with `change` applied."""
    return {
        "record_id": "r1",
        "snippet_id": "hw-tma:1",
        "page_id": "hw-tma",
        "target": "sm_90a",
        "step": "compile",
        "status": "pass",
        "content_hash": "abc",
        "timestamp": "2026-12-01T00:00:00Z",
        **change,
    }
