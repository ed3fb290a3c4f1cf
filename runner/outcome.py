"""The result of one step before it is tied to a page position: what the cache stores.

A `StepOutcome` holds everything observed (status, first error, output,
resources, checks, GPU, isolation, time) with the error's location relative to
the snippet (`segment`, `segment_line`). `to_record` turns it into an
`EvidenceRecord` for the snippet as it is on its page now, so a block that
merely moved keeps its cached result with the right line numbers.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import socket
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from runner.diagnostics import page_line
from runner.evidence import EvidenceRecord
from snippets.snippet import Snippet


def utc_now() -> str:
    """ISO 8601 UTC timestamp with seconds precision."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def host_name() -> str:
    return socket.gethostname()


@dataclass
class StepOutcome:
    """One step's result, independent of where the snippet sits on its page."""

    step: str  # compile | run | sass
    status: str  # pass | fail | xfail | timeout | error | skipped | unverified
    detail: str = ""  # first error or reason, without location
    kind: str | None = None  # failure classification (runner/diagnostics.py)
    segment: str | None = None  # where the first error is: snippet, chain-N, prelude
    segment_line: int | None = None  # line inside that segment
    exit_code: int | None = None
    duration_s: float = 0.0
    output: str = ""
    output_truncated: bool = False
    resources: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # ptxas: an instruction ignored, performance lost
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    metrics: dict[str, Any] | None = None  # run: the harness's validated measurements (runner/metrics.py)
    isolation: str = "none"
    command: str = ""  # the exact command line(s) run in the snippet's folder ("a && b" for two builds)
    artifacts: dict[str, str] = field(
        default_factory=dict
    )  # compile step: {"sass": sha256, "ptx": sha256, "note": why not} (runner/artifacts.py)
    host: str = field(default_factory=host_name)
    timestamp: str = field(default_factory=utc_now)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepOutcome:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def to_record(snippet: Snippet, target: str, outcome: StepOutcome, toolchain: str) -> EvidenceRecord:
    """The evidence record of `outcome` for `snippet` at its current place on its page."""
    lengths = {"snippet": snippet.full_source.count("\n") or 1}
    for i, part in enumerate(snippet.chain, start=1):
        lengths[f"chain-{i}"] = part.source.count("\n") or 1
    line = page_line(snippet.first_line, [p.first_line for p in snippet.chain], outcome.segment, outcome.segment_line, lengths)
    message = outcome.detail
    if outcome.kind and outcome.status in ("fail", "timeout", "error", "unverified") and not message.startswith(outcome.kind):
        message = f"{outcome.kind}: {message}" if message else outcome.kind
    if line is not None:
        message = f"{message} ({snippet.path}:{line})"
    elif outcome.segment == "prelude":
        message = f"{message} (in the prelude)"
    return EvidenceRecord(
        page_id=snippet.page_id,
        snippet_id=snippet.id,
        path=snippet.path,
        line=snippet.line,
        lang=snippet.lang,
        target=target,
        step=outcome.step,
        status=outcome.status,
        message=message,
        content_hash=snippet.content_hash,
        toolchain=toolchain,
        timestamp=outcome.timestamp,
        host=outcome.host,
        isolation=outcome.isolation,
        command=outcome.command,
        artifacts=outcome.artifacts,
        mode=snippet.mode,
        error_kind=outcome.kind,
        error_line=line,
        exit_code=outcome.exit_code,
        duration_s=round(outcome.duration_s, 3),
        output=outcome.output,
        output_truncated=outcome.output_truncated,
        resources=outcome.resources,
        checks=outcome.checks,
        warnings=outcome.warnings,
        gpu_name=outcome.gpu_name,
        compute_capability=outcome.compute_capability,
        driver_version=outcome.driver_version,
        metrics=outcome.metrics,
    )


def outcome_from_process(res: Any, step: str = "compile", **extra: Any) -> StepOutcome:
    """A passing outcome carrying a finished process's exit code, time, output and isolation.

    `res` is a runner.sandbox.ProcessResult; callers then mark failures on it.
    """
    return StepOutcome(
        step=step,
        status="pass",
        exit_code=res.exit_code,
        duration_s=res.duration_s,
        output=res.output,
        output_truncated=res.truncated,
        isolation=res.isolation,
        command=shlex.join(res.argv),
        **extra,
    )
