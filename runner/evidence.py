"""Evidence: one record per snippet × target × step, as the runner saw it; JSONL in and out.

A record is self-contained (it names the page, the snippet, the toolchain, the
GPU and the isolation in force) so that evidence produced on a GPU node can be
imported by the service later. `record_id` is a hash of what identifies one
observation, so importing the same file twice adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from runner.status import FAILING, RECORD_STATUSES

__all__ = ["FAILING", "STATUSES", "EvidenceRecord", "compute_record_id", "read_jsonl", "write_jsonl"]

STATUSES = RECORD_STATUSES
"""What a step can end as; defined, with their order, in runner/status.py."""


@dataclass
class EvidenceRecord:
    """What happened to one snippet, for one target, in one step."""

    page_id: str  # id of the page the snippet is on
    snippet_id: str  # `PAGE_ID:N`
    path: str  # page file relative to the wiki root
    line: int  # file line of the block's opening fence
    lang: str  # cuda | cpp | ptx | python
    target: str  # e.g. "sm_90a" ("any" for a cpp/python block on a page without architectures)
    step: str  # compile | run | sass
    status: str  # pass | fail | xfail | timeout | error | skipped | unverified
    message: str  # first error, or why it was skipped / unverified; "" on a plain pass
    content_hash: str  # the snippet's content hash when this was observed (stale if the snippet changed)
    toolchain: str  # e.g. "nvcc 13.0.88"
    timestamp: str  # ISO 8601 UTC time of the observation
    host: str  # machine that produced it
    isolation: str  # sandbox in force: bwrap | unshare-net | none
    command: str = ""  # exact command line(s) run in the snippet's folder, e.g. the nvcc invocation ("" in older records)
    artifacts: dict[str, str] = field(default_factory=dict)  # compile step: sha256 of the kept SASS / PTX (runner/artifacts.py)
    mode: str = ""  # the snippet's mode: run | compile | compile_fail | sketch | error
    error_kind: str | None = None  # classification of the failure (undefined identifier, PTX syntax error, …)
    error_line: int | None = None  # page file line of the first error, when it maps back to the page
    exit_code: int | None = None  # exit status of the command (negative: killed by that signal)
    duration_s: float = 0.0  # wall-clock seconds of the command(s)
    output: str = ""  # captured output, capped; the cut is marked "[… N lines omitted]"
    output_truncated: bool = False  # True when `output` is not the whole output
    resources: dict[str, Any] = field(default_factory=dict)  # ptxas: registers, smem_bytes, spill bytes, per function
    checks: list[dict[str, Any]] = field(default_factory=list)  # sass/ptx/output checks: {kind, pattern, ok, detail}
    warnings: list[str] = field(
        default_factory=list
    )  # compiler messages that change what a pass means (diagnostics.meaning_warnings)
    gpu_name: str | None = None  # GPU the program ran on (run step)
    compute_capability: str | None = None  # of that GPU, e.g. "9.0"
    driver_version: str | None = None  # of that GPU's driver
    metrics: dict[str, Any] | None = None  # run: measurements the harness reported on its own descriptor
    record_id: str = ""  # deterministic id: hash of snippet_id, target, step, content_hash, toolchain, timestamp

    def __post_init__(self) -> None:
        if not self.record_id:
            self.record_id = compute_record_id(
                self.snippet_id, self.target, self.step, self.content_hash, self.toolchain, self.timestamp
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvidenceRecord:
        """Build from a dict, ignoring keys this version does not know (newer producers)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def compute_record_id(snippet_id: str, target: str, step: str, content_hash: str, toolchain: str, timestamp: str) -> str:
    """sha256 (first 32 hex digits) of what identifies one observation."""
    blob = "\x1f".join((snippet_id, target, step, content_hash, toolchain, timestamp)).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def write_jsonl(path: Path | str, records: Iterable[EvidenceRecord]) -> int:
    """Write records one JSON object per line (parent folders created); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_jsonl(path: Path | str) -> list[EvidenceRecord]:
    """Read records written by `write_jsonl` (blank lines ignored; a bad line raises ValueError naming it)."""
    records: list[EvidenceRecord] = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                records.append(EvidenceRecord.from_dict(data))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not an evidence record: {exc}") from None
    return records
