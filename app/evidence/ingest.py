"""Incoming evidence records: the `EvidenceIn` model every record passes before it is stored.

Runners post records (`POST /api/evidence`), `kernelwiki evidence import` and
the service's start read them from JSONL; all of them go through `EvidenceIn`.
Every field is bounded: identifiers are refused when too long, while a long
`output` is kept as head and tail with the cut marked ("[… N lines omitted]",
or "[… N bytes omitted]" inside one long line) and a long `message` is cut the
same way. Timestamps must be RFC 3339 with a time zone; they are parsed and
stored in one fixed-width UTC form, so ordering the stored text is ordering by
time.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from runner.output import cap_text
from runner.status import RECORD_STATUSES, STEP_ORDER

OUTPUT_MAX_BYTES = 64 * 1024
"""`output` above this is kept as head and tail (half each) around an omission marker."""
MESSAGE_MAX_BYTES = 4 * 1024
"""`message` above this is cut the same way."""
STRUCT_MAX_BYTES = 16 * 1024
"""`resources` and `checks` as JSON may not be larger than this."""
MAX_CHECKS = 200
COMMAND_MAX_BYTES = 8 * 1024
"""`command` (the exact command line of the step) may not be longer than this."""
MAX_WARNINGS = 64
"""At most this many compiler warnings per record."""

MAX_NESTING = 16
"""Arrays and objects nested deeper than this are refused: a post is an array of records whose deepest field
(`checks`: object → list → object) sits 5 levels down; Python's JSON decoder gives up near 1,000 levels."""

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""The stored form of every timestamp: fixed width, UTC, so text order is time order."""

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


def canonical_stamp(value: datetime) -> str:
    """A timezone-aware time in the stored form (`2026-12-02T11:01:43.000000Z`)."""
    return value.astimezone(UTC).strftime(STAMP_FORMAT)


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or len(value) > 40 or not _RFC3339.fullmatch(value.strip()):
        raise ValueError("must be an RFC 3339 time with a time zone, e.g. 2026-12-02T11:01:43Z")
    return value.strip()


def _metrics(value: Any) -> Any:
    """A run's measurements pass the runner's own validation (size, shape, the H200 roofline) or are refused."""
    if value is None:
        return None
    from runner.metrics import validate_metrics

    doc, problem = validate_metrics(json.dumps(value).encode())
    if problem:
        raise ValueError(problem)
    return doc


def _json_bounded(value: Any) -> Any:
    if len(json.dumps(value, default=str)) > STRUCT_MAX_BYTES:
        raise ValueError(f"larger than {STRUCT_MAX_BYTES} bytes as JSON")
    return value


Id = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$")]
Short = Annotated[str, Field(max_length=200)]
Stamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]


class EvidenceIn(BaseModel):
    """One verification record as a runner reports it (runner/evidence.py `EvidenceRecord`); unknown keys are dropped."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)

    record_id: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
    snippet_id: Id = Field(description="`PAGE_ID:N`; must exist in the index")
    page_id: Id = Field(description="the page the snippet is on; must match the snippet")
    target: Annotated[str, Field(min_length=1, max_length=32)]
    step: str = Field(description=f"one of {', '.join(STEP_ORDER)} (runner/status.py)")
    status: str = Field(description=f"one of {', '.join(RECORD_STATUSES)} (runner/status.py)")
    content_hash: Annotated[str, Field(min_length=1, max_length=128)]
    timestamp: Stamp = Field(description="RFC 3339 time of the observation, with a time zone")
    message: str = Field(default="", description=f"first error or reason; cut to {MESSAGE_MAX_BYTES} bytes")
    output: str = Field(default="", description=f"captured output; above {OUTPUT_MAX_BYTES} bytes only head and tail are kept")
    output_truncated: bool = False
    path: Annotated[str, Field(max_length=1000)] = ""
    line: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    lang: Annotated[str, Field(max_length=32)] = ""
    mode: Annotated[str, Field(max_length=32)] = ""
    toolchain: Short = ""
    host: Short = ""
    isolation: Short = ""
    error_kind: Short | None = None
    error_line: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    exit_code: Annotated[int, Field(ge=-1_000, le=1_000_000)] | None = None
    duration_s: Annotated[float, Field(ge=0, le=10_000_000)] = 0.0
    resources: Annotated[dict[str, Any], BeforeValidator(_json_bounded)] = Field(default_factory=dict)
    checks: Annotated[list[dict[str, Any]], Field(max_length=MAX_CHECKS), BeforeValidator(_json_bounded)] = Field(
        default_factory=list
    )
    gpu_name: Short | None = None
    compute_capability: Annotated[str, Field(max_length=16)] | None = None
    driver_version: Annotated[str, Field(max_length=64)] | None = None
    command: Annotated[str, Field(max_length=COMMAND_MAX_BYTES)] = Field(
        default="", description="the exact command line of the step (compiler flags included), to reproduce it"
    )
    warnings: Annotated[list[Annotated[str, Field(max_length=MESSAGE_MAX_BYTES)]], Field(max_length=MAX_WARNINGS)] = Field(
        default_factory=list,
        description="compiler messages that change what a pass means (an instruction ignored, performance lost)",
    )
    metrics: Annotated[dict[str, Any] | None, BeforeValidator(_metrics)] = Field(
        default=None, description="run: the measuring harness's document, checked again by runner.metrics.validate_metrics"
    )
    job_id: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="the queue job that produced it (app/queue/worker.py)"
    )
    worker: Short | None = Field(default=None, description="the GPU worker that produced it")
    toolchain_release: Annotated[str, Field(pattern=r"^\d{2}\.\d{1,2}$")] | None = Field(
        default=None,
        description="the CUDA release explicitly chosen for it (verify --toolchain, a worker's KERNELWIKI_TOOLCHAIN); "
        "such a record never replaces the default toolchain's as the current evidence",
    )

    @field_validator("step", "status")
    @classmethod
    def _known_word(cls, value: str, info: ValidationInfo) -> str:
        allowed = STEP_ORDER if info.field_name == "step" else RECORD_STATUSES
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    @field_validator("duration_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @field_validator("message")
    @classmethod
    def _cap_message(cls, value: str) -> str:
        return cap_text(value, MESSAGE_MAX_BYTES)[0]

    def model_post_init(self, _context: Any) -> None:
        capped, cut = cap_text(self.output, OUTPUT_MAX_BYTES)
        if cut:
            self.output, self.output_truncated = capped, True

    @property
    def stamp(self) -> str:
        """The timestamp in its stored, sortable form."""
        return canonical_stamp(self.timestamp)

    def to_record(self) -> dict[str, Any]:
        """The JSON-safe record as stored (and exported): every field, the timestamp in stored form."""
        data = self.model_dump(mode="json")
        data["timestamp"] = self.stamp
        if data.get("toolchain_release") is None:  # the default toolchain's records read as they did before it existed
            data.pop("toolchain_release", None)
        return data


def current_rank(fresh: bool, toolchain_release: str | None, timestamp: Any) -> tuple[bool, bool, Any]:
    """How records of one snippet × target × step compete to be its current evidence (the status, the page badge):
    the current content's before stale content, then the default toolchain's before an explicitly chosen release's
    (`verify --toolchain 13.1` informs, it does not re-judge), then the newest."""
    return (fresh, toolchain_release is None, timestamp)


class JSONProblem(ValueError):
    """Text that is not JSON, or JSON nested deeper than MAX_NESTING (the message says which)."""


def parse_json(text: str | bytes, max_nesting: int = MAX_NESTING) -> Any:
    """`json.loads` of a post body or a JSONL line, refusing nesting beyond `max_nesting` with JSONProblem.

    The decoder's own recursion limit surfaces as RecursionError; that, and anything nested deeper than
    the limit, is reported as one sentence. The depth is measured without recursion.
    """
    too_deep = f"arrays and objects are nested deeper than {max_nesting} levels"
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONProblem(too_deep) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JSONProblem(f"not JSON: {exc}") from None
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_nesting:
            raise JSONProblem(too_deep)
        level.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


def parse_record(raw: Any) -> tuple[EvidenceIn | None, str | None]:
    """A record checked against `EvidenceIn`, or why it is refused (one line naming the fields)."""
    if not isinstance(raw, dict):
        return None, "a record must be a JSON object"
    try:
        return EvidenceIn.model_validate(raw), None
    except ValidationError as exc:
        return None, "; ".join(_describe(e) for e in exc.errors()[:5])


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.get("loc", ())) or "record"
    if error.get("type") == "missing":
        return f"missing field '{where}'"
    return f"field '{where}': {error.get('msg', 'invalid')}"
