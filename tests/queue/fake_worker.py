"""A GPU worker for the queue tests: the real queue, worker loop, recovery and service; a fake verification.

Usage: python tests/queue/fake_worker.py TARGET NAME (settings from KERNELWIKI_* as usual).

The fake verification reads directives from the snippet's source:
`// SLEEP S` sleeps S seconds (a long job to kill). It leaves a marker file
`<markers>/<snippet>@<target>.<name>.started` so a test knows a job is running.
With KW_TEST_HANG_AFTER_POST=SNIPPET_ID the worker hangs right after posting
that snippet's evidence (before the job is acknowledged), to be killed there.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.queue import worker  # noqa: E402
from app.queue.client import EvidenceClient  # noqa: E402
from app.settings import Settings  # noqa: E402
from runner.evidence import EvidenceRecord  # noqa: E402

TOOLCHAIN = "nvcc test-1.0"
MARKERS = Path(os.environ.get("KW_TEST_MARKERS", "."))
HANG_AFTER_POST = os.environ.get("KW_TEST_HANG_AFTER_POST", "")
NAME = "worker"  # the worker's name: its second argument when run as a program (not pytest's argv when imported)


def marker(snippet_id: str, target: str, what: str) -> Path:
    return MARKERS / f"{snippet_id.replace(':', '_')}@{target}.{NAME}.{what}"


def fake_verify(snippet: dict[str, Any], target: str, force: bool) -> list[dict[str, Any]]:
    """One passing compile record per call, after the source's SLEEP directives."""
    marker(snippet["id"], target, "started").touch()
    for line in snippet["full_source"].splitlines():
        if line.strip().startswith("// SLEEP "):
            time.sleep(float(line.split()[2]))
    # What a snippet could read of its worker: the environment, also as the kernel shows it.
    leaked = [k for k in os.environ if "TOKEN" in k or "DATABASE_URL" in k or k == "KERNELWIKI_DB"]
    with open(f"/proc/{os.getpid()}/environ", "rb") as fh:
        initial = fh.read().decode(errors="replace")
    leaked += [
        f"/proc:{k}" for k in ("KERNELWIKI_RUNNER_TOKEN", "KERNELWIKI_QUEUE_DATABASE_URL", "queue-test-token") if k in initial
    ]
    record = EvidenceRecord(
        page_id=snippet["page_id"],
        snippet_id=snippet["id"],
        path=snippet["path"],
        line=snippet["line"],
        lang=snippet["lang"],
        target=target,
        step="compile",
        status="pass",
        message=",".join(leaked),
        content_hash=snippet["content_hash"],
        toolchain=TOOLCHAIN,
        timestamp=datetime.now(UTC).isoformat(timespec="microseconds"),
        host=NAME,
        isolation="none",
        mode=snippet["mode"],
    )
    return [record.to_dict()]


class HangingClient(EvidenceClient):
    """Posts, then (for one snippet) hangs before the job can be acknowledged."""

    def post(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        result = super().post(records)
        if records and records[0]["snippet_id"] == HANG_AFTER_POST:
            marker(records[0]["snippet_id"], records[0]["target"], "posted").touch()
            time.sleep(3600)
        return result


if __name__ == "__main__":
    import logging

    NAME = sys.argv[2] if len(sys.argv) > 2 else NAME
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker.EvidenceClient = HangingClient  # type: ignore[misc]  # the name run_gpu_worker builds its client from
    worker.run_gpu_worker(Settings(), sys.argv[1], verify=fake_verify, toolchain_label=TOOLCHAIN, name=NAME)
