"""Performance claims bound to the programs that measure them, and numbers in the prose that nothing backs.

A page's front matter may carry `performance_claims` (the public KernelWiki fields: gpu, dtype,
shape, metric, value, utilization, source_id, source_locator). kernelwiki adds three keys that bind
a claim to a measurement:

    performance_claims:
      - {gpu: H200, metric: TB/s, value: 4.1, measured_by: hw-tma:6, metric_key: bulk_copy_bw, tolerance: 0.08}

* `measured_by` names the program (a snippet id) whose run records carry `metrics` (the measuring
  harness writes them on a descriptor of their own; runner/metrics.py validates them);
* `metric_key` names one of that program's metrics; `tolerance` is relative (0.08 = 8%).

The rule (one home, here): for each bound claim, the newest passing run of the program's *current*
code on a GPU whose name contains the claim's `gpu` must report the metric, converted to the claim's
unit, within `tolerance` of `value`: outside is an error; no such measurement yet is a warning. A
claim about a GPU this project has no access to (`UNAVAILABLE_GPUS`: B200, B300, GB200…) cannot be
bound: it must name a `source_id` and stays source-reported. A claim with neither binding nor source
is a warning. And, as a report, a number with a performance unit in the prose that is neither a
claim's value nor in a paragraph that cites a source or names a measuring program is a warning.

The claims are read, and the three keys checked, by app/perf.read_claims (the one parser of
`performance_claims`); this module holds the rule that compares a bound claim with its measurement.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.index.perf import PerformanceClaim, read_claims

UNAVAILABLE_GPUS = ("B200", "B300", "GB200", "GB300", "RTX 50", "RTX PRO", "H20", "A100", "H100", "MI")
"""GPUs no runner of this project has: claims about them are source-reported (an H200 is not an H100)."""

UNIT_SCALE = {
    ("B/s", "B/s"): 1.0,
    ("B/s", "GB/s"): 1e-9,
    ("B/s", "TB/s"): 1e-12,
    ("FLOP/s", "FLOP/s"): 1.0,
    ("FLOP/s", "GFLOP/s"): 1e-9,
    ("FLOP/s", "TFLOP/s"): 1e-12,
    ("FLOP/s", "TFLOPS"): 1e-12,
    ("us", "us"): 1.0,
    ("us", "ms"): 1e-3,
    ("us", "ns"): 1e3,
    ("cycles", "cycles"): 1.0,
    ("x", "x"): 1.0,
}
"""(unit the harness reports, unit the claim is written in) -> factor."""


BoundClaim = PerformanceClaim
"""A claim as app/perf.read_claims reads it (the one parser of `performance_claims`)."""


@dataclass
class Measurement:
    """The measurement a bound claim is compared with."""

    value: float  # in the claim's unit
    ci_low: float
    ci_high: float
    gpu_name: str
    timestamp: str
    clocks: dict[str, Any]
    record_id: str

    def display(self, claimed: float, unit: str) -> str:
        """'claimed X · measured Y ± e on GPU, date, clocks'."""
        err = max(self.value - self.ci_low, self.ci_high - self.value)
        sm = self.clocks.get("sm_mhz_min"), self.clocks.get("sm_mhz_max")
        clocks = f"SM {sm[0]}-{sm[1]} MHz, memory {self.clocks.get('mem_mhz')} MHz" if sm[0] else "clocks not read (no NVML)"
        return (
            f"claimed {claimed:g} {unit} · measured {self.value:.4g} ± {err:.2g} {unit} on {self.gpu_name}, "
            f"{self.timestamp[:10]}, {clocks}"
        )


@dataclass
class ClaimVerdict:
    claim: BoundClaim
    severity: str | None  # None (holds), "warning" or "error"
    message: str
    measurement: Measurement | None = None


def claim_problems(c: PerformanceClaim) -> list[str]:
    """What makes a claim uncheckable: its binding-key problems (app/index/perf.py) and a missing gpu or value."""
    missing = [] if c.gpu and c.value is not None else ["a claim needs 'gpu' and a numeric 'value'"]
    return missing + c.problems


def read_bound_claims(page: Any) -> list[PerformanceClaim]:
    """The page's claims with their binding keys (app/perf.read_claims)."""
    return read_claims(page)[0]


def unavailable(gpu: str) -> bool:
    """Whether no runner here has this GPU (the claim cannot be measured, only sourced)."""
    g = gpu.upper().replace("NVIDIA ", "")
    return not g.startswith("H200") and any(g.startswith(u.upper()) for u in UNAVAILABLE_GPUS)


def latest_measurement(claim: BoundClaim, records: Iterable[Any], content_hash: str | None) -> Measurement | None:
    """The newest passing run of the current program on the claimed GPU that reports the claim's metric."""
    best = None
    for r in records:
        if r.snippet_id != claim.measured_by or r.step != "run" or r.status != "pass":
            continue
        if content_hash is not None and r.content_hash != content_hash:
            continue  # stale: the program changed since
        if (claim.gpu or "").lower() not in str(r.gpu_name or "").lower():
            continue
        m = ((getattr(r, "metrics", None) or {}).get("metrics") or {}).get(claim.metric_key or "")
        if not isinstance(m, dict) or best is not None and r.timestamp <= best[0].timestamp:
            continue
        best = (r, m)
    if best is None:
        return None
    r, m = best
    scale = UNIT_SCALE.get((str(m.get("unit")), claim.metric or ""))
    if scale is None:
        raise ValueError(f"the program reports {claim.metric_key} in {m.get('unit')!r}, the claim is in {claim.metric!r}")
    v = float(m["value"]) * scale
    lo = float(m.get("ci_low") or m["value"]) * scale
    hi = float(m.get("ci_high") or m["value"]) * scale
    clocks = (r.metrics or {}).get("clocks") or {}
    return Measurement(v, min(lo, hi), max(lo, hi), str(r.gpu_name), r.timestamp, clocks, r.record_id)


def check_claims(claims: list[BoundClaim], records: list[Any], hashes: dict[str, str]) -> list[ClaimVerdict]:
    """A verdict for every claim (see the module docstring); `hashes` maps snippet id -> current content hash."""
    out = []
    for c in claims:
        problems = claim_problems(c)
        if problems:
            out.append(ClaimVerdict(c, "error", "; ".join(problems)))
            continue
        assert c.gpu is not None
        if unavailable(c.gpu):
            if c.measured_by:
                out.append(
                    ClaimVerdict(
                        c,
                        "error",
                        f"no {c.gpu} is available here: a claim about it cannot be measured_by a program; cite its source_id",
                    )
                )
            elif not c.source_id:
                out.append(ClaimVerdict(c, "warning", f"a claim about {c.gpu} (not available here) needs a source_id"))
            else:
                out.append(ClaimVerdict(c, None, f"source-reported ({c.source_id}); no {c.gpu} here to measure it"))
            continue
        if not c.measured_by:
            sev = None if c.source_id else "warning"
            out.append(
                ClaimVerdict(c, sev, f"source-reported ({c.source_id})" if c.source_id else "neither measured_by nor source_id")
            )
            continue
        if c.measured_by not in hashes:
            out.append(ClaimVerdict(c, "error", f"measured_by '{c.measured_by}' is not a program of this wiki"))
            continue
        try:
            m = latest_measurement(c, records, hashes[c.measured_by])
        except ValueError as exc:
            out.append(ClaimVerdict(c, "error", str(exc)))
            continue
        if m is None:
            out.append(
                ClaimVerdict(
                    c,
                    "warning",
                    f"not measured yet: no passing run of the current {c.measured_by} on a {c.gpu} reports '{c.metric_key}'",
                )
            )
            continue
        assert c.value is not None
        off = abs(m.value - c.value) / abs(c.value) if c.value else math.inf
        if off > c.tolerance:
            msg = f"{m.display(c.value, c.metric or '')}: off by {off:.1%}, more than the tolerance {c.tolerance:.0%}"
            out.append(ClaimVerdict(c, "error", msg, m))
        else:
            out.append(ClaimVerdict(c, None, m.display(c.value, c.metric or ""), m))
    return out


_UNIT = r"(?:[KMGT]i?B/s|[GT]FLOP/s|[GT]FLOPS|TOPS|cycles|clocks|ns|µs|us|ms)"
PROSE_NUMBER = re.compile(r"(?<![\w.])(~|≈|about\s)?(\d+(?:[.,]\d+)?)\s?" + _UNIT + r"(?![\w/])")
"""A number with a performance unit in prose."""
_CITES = re.compile(
    r"\]\(|\[[a-z][\w.-]*\]|\b(?:doc|blog|pr|repo|paper)-[\w-]+|datasheet|measured|computed|guide|the program|ptxas|cuobjdump|output",
    re.I,
)


def prose_numbers(body: str, body_line: int, claim_values: Iterable[float]) -> list[tuple[int, str]]:
    """(file line, number as written) of each performance number in the prose, outside code, that is
    neither a claim's value nor in a paragraph citing a source or naming the measuring program."""
    values = [v for v in claim_values if v]
    found: list[tuple[int, str]] = []
    in_code = False
    paragraph: list[tuple[int, str]] = []

    def flush() -> None:
        text = " ".join(t for _, t in paragraph)
        if not _CITES.search(text):
            for line, t in paragraph:
                if t.lstrip().startswith("|"):
                    continue  # tables carry their sources in their heading or notes
                for m in PROSE_NUMBER.finditer(t):
                    n = float(m.group(2).replace(",", ""))
                    if not any(abs(n - v) <= 0.05 * abs(v) for v in values):
                        found.append((line, m.group(0).strip()))
        paragraph.clear()

    for i, line in enumerate(body.split("\n")):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
            flush()
            continue
        if in_code:
            continue
        if not line.strip():
            flush()
        else:
            paragraph.append((body_line + i, line))
    flush()
    return found


def lint_measured_claims(pages: Iterable[Any], snippets_by_page: dict[str, list[Any]], records: list[Any]) -> list[Any]:
    """Diagnostics for `kernelwiki lint`: bound claims against their measurements, and unbacked prose numbers."""
    from snippets.diagnostic import Diagnostic

    hashes = {s.id: s.content_hash for snippets in snippets_by_page.values() for s in snippets if s.mode == "run"}
    out = []
    for page in pages:
        claims = read_bound_claims(page)
        line = page.line_of("performance_claims")
        for v in check_claims(claims, records, hashes):
            if v.severity:
                out.append(Diagnostic(page.path, line, v.severity, f"performance_claims[{v.claim.position}]: {v.message}"))
        for nline, text in prose_numbers(page.body, page.body_line, [c.value for c in claims if c.value is not None]):
            out.append(
                Diagnostic(page.path, nline, "warning", f"'{text}' is neither a performance claim's value nor cited nor measured")
            )
    return out


def claim_view(c: PerformanceClaim, verdict: ClaimVerdict) -> dict[str, Any]:
    """What the page, the API and MCP show of one claim beside its fields: its state and its measurement.

    `state`: "measured" (within tolerance), "out_of_tolerance", "not_measured" (bound, no current
    passing run on the claimed GPU yet), "source_reported" (a cited number, e.g. a GPU we do not
    have), "invalid" (a binding error), "unbacked" (neither measured_by nor source_id).
    """
    m = verdict.measurement
    if m is not None:
        assert c.value is not None
        off = abs(m.value - c.value) / abs(c.value) if c.value else math.inf
        within = off <= c.tolerance
        state = "measured" if within else "out_of_tolerance"
        measurement: dict[str, Any] | None = {
            "value": m.value,
            "ci_low": m.ci_low,
            "ci_high": m.ci_high,
            "ci": max(m.value - m.ci_low, m.ci_high - m.value),  # ± of the 95% interval of the median
            "unit": c.metric,
            "gpu": m.gpu_name,
            "date": m.timestamp[:10],
            "timestamp": m.timestamp,
            "clocks": m.clocks,
            "snippet_id": c.measured_by,
            "record_id": m.record_id,
            "relative_difference": off,
            "within_tolerance": within,
        }
        display = m.display(c.value, c.metric or "")
    else:
        measurement = None
        if verdict.severity == "error":
            state, display = "invalid", verdict.message
        elif c.measured_by:
            state, display = "not_measured", "not measured yet"
        elif c.source_id:
            state, display = "source_reported", "source-reported"
            if c.gpu and unavailable(c.gpu):
                display = f"source-reported (no {c.gpu} here to measure it)"
        else:
            state, display = "unbacked", "neither measured nor cited"
    return {"state": state, "display": display, "measurement": measurement}


def _stored_records(conn: Any, snippet_ids: list[str]) -> tuple[list[Any], dict[str, str]]:
    """Passing run records of these programs from the service's evidence table, and their current hashes."""
    import json
    from types import SimpleNamespace

    from sqlalchemy import select

    from app.index.models import EvidenceRow, SnippetRow, table_of

    if not snippet_ids:
        return [], {}
    e, s = table_of(EvidenceRow), table_of(SnippetRow)
    hashes = {
        r.id: r.content_hash
        for r in conn.execute(select(s.c.id, s.c.content_hash).where(s.c.id.in_(snippet_ids), s.c.mode == "run"))
    }
    rows = conn.execute(
        select(e.c.record_id, e.c.snippet_id, e.c.step, e.c.status, e.c.content_hash, e.c.timestamp, e.c.data).where(
            e.c.snippet_id.in_(snippet_ids), e.c.step == "run", e.c.status == "pass"
        )
    ).all()
    records = []
    for r in rows:
        data = json.loads(r.data)
        records.append(
            SimpleNamespace(
                record_id=r.record_id,
                snippet_id=r.snippet_id,
                step=r.step,
                status=r.status,
                content_hash=r.content_hash,
                timestamp=r.timestamp,
                gpu_name=data.get("gpu_name"),
                metrics=data.get("metrics"),
            )
        )
    return records, hashes


def with_measurements(conn: Any, claims: list[PerformanceClaim]) -> list[dict[str, Any]]:
    """The one data function of the claims display: each claim's fields (`to_dict`) plus `state`,
    `display` and `measurement`, read from the service's evidence store in one query. The page
    template, GET /api/pages/{id}, GET /api/performance-claims and MCP get_page all read this."""
    records, hashes = _stored_records(conn, sorted({c.measured_by for c in claims if c.measured_by}))
    verdicts = check_claims(claims, records, hashes)
    return [{**c.to_dict(), **claim_view(c, v)} for c, v in zip(claims, verdicts, strict=True)]
