"""One verification job on a GPU worker: skip it when its evidence exists, else verify and post the records.

`Runtime.handle` is what the queue's `kernelwiki.verify` task calls
(app/queue/tasks.py). The service's evidence history decides whether the job is
still wanted; record ids are fixed per job, so a retried or twice-delivered job
writes its records once.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.queue.client import EvidenceClient, EvidenceRefused
from app.queue.tasks import NOT_VERIFIED

VerifyFn = Callable[[dict[str, Any], str, bool], list[dict[str, Any]]]
"""verify(snippet as Snippet.to_dict(), target, force) → evidence records as dicts."""


log = logging.getLogger("kernelwiki.worker")


def runner_verify(gpus: list[Any], toolchain: Any, cache_dir: Path, isolation: str | None = None) -> VerifyFn:
    """Verification by the runner (runner/verify.py) on `gpus` with `toolchain`, sandboxed as `isolation` says."""

    def verify(snippet: dict[str, Any], target: str, force: bool) -> list[dict[str, Any]]:
        from runner.verify import verify as run
        from snippets.snippet import Snippet

        report = run(
            ".",
            targets=[target],
            snippets=[Snippet.from_dict(snippet)],
            jobs=1,
            use_cache=not force,
            cache_dir=cache_dir,
            toolchain=toolchain,
            gpus=gpus,
            isolation=isolation,
        )
        return [r.to_dict() for r in report.records]

    return verify


def _when(stamp: str) -> datetime:
    try:
        value = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def job_record_id(record: dict[str, Any], job_id: int) -> str:
    """A record id fixed by the job: a retried or twice-delivered job writes the same records once."""
    from runner.evidence import compute_record_id

    return compute_record_id(
        record["snippet_id"], record["target"], record["step"], record["content_hash"], record["toolchain"], f"job:{job_id}"
    )


@dataclass
class Runtime:
    """What a GPU worker's verification jobs run with."""

    targets: list[str]  # the queues served (besides `any`)
    toolchain: str  # label recorded in evidence, e.g. "nvcc 13.0.88"
    client: EvidenceClient
    verify: VerifyFn
    name: str = field(default_factory=socket.gethostname)  # asked when a runtime is made, not at import
    toolchain_release: str | None = None  # KERNELWIKI_TOOLCHAIN: recorded, so its records never replace the default's

    def handle(self, job_id: int, attempts: int, job: dict[str, Any]) -> str:
        """Verify one snippet × target unless that is done already; post the evidence."""
        sid, target, content_hash = job["snippet_id"], job["target"], job["content_hash"]
        force = bool(job.get("force"))
        if not force and self.toolchain in job.get("verified", []):
            return f"skipped {sid}@{target}: verified with {self.toolchain} already"
        history = self.client.history(sid)
        if history is None:
            return f"skipped {sid}@{target}: no longer in the index"
        ours = [r for r in history if r["target"] == target and r["data"].get("content_hash") == content_hash]
        if any(r["stale"] for r in ours):
            return f"skipped {sid}@{target}: its content changed after this job was queued"
        if any(r["data"].get("job_id") == job_id for r in ours):
            return f"done {sid}@{target}: this job's evidence was recorded before it was retried"
        same = [r for r in ours if r["data"].get("toolchain") == self.toolchain and r["status"] not in NOT_VERIFIED]
        if same and (not force or any(_when(r["timestamp"]) >= _when(job.get("queued_at", "")) for r in same)):
            return f"skipped {sid}@{target}: verified with {self.toolchain} already"
        records = self.verify(job["snippet"], target, force)
        if not records:
            raise RuntimeError(f"the runner produced no evidence for {sid}@{target}")
        for record in records:
            record["job_id"] = job_id
            record["worker"] = self.name
            if self.toolchain_release:
                record["toolchain_release"] = self.toolchain_release
            record["record_id"] = job_record_id(record, job_id)
        try:
            result = self.client.post(records)
        except EvidenceRefused as exc:  # final: a retry would be refused the same way
            log.warning("%s@%s: the service refused the evidence: %s", sid, target, exc)
            return f"refused {sid}@{target}: {exc}"
        statuses = ",".join(f"{r['step']}={r['status']}" for r in records)
        return f"{sid}@{target}: {statuses} ({result.get('inserted', 0)} new, {result.get('duplicates', 0)} already recorded)"
