"""Running one try unit through the runner's own verify path, and the record it ends with.

There is no second compile path: `execute` calls `runner.verify.verify` with the unit's snippet, as nightly
verification and the queue's GPU workers do, so the same sandbox (bwrap by default), limits, read-back rule,
re-check of the attributes (`runner.verify.rechecked`) and judgement apply. What differs is only where the
results go: a try result (app/tryrun/store.py), never the evidence table, and a runner cache and artifact folder
of its own (`Settings.try_dir`), so that nothing a try run computed can be taken for page evidence by a later
verification through the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.tryrun.work.unit import Unit, with_id
from runner.artifacts import ArtifactStore
from runner.status import worst

log = logging.getLogger("kernelwiki.try")

MAX_LISTING_CHARS = 200_000
"""SASS or PTX kept in a try result per target (the rest is cut, and the result says so)."""

NOT_EVIDENCE = (
    "A try result: what this source did once, here. It is not page evidence (it never counts for a page's "
    "claims or status) and makes no performance claim."
)

OnEvent = Callable[[str, dict[str, Any]], None]
"""on_event(name, data): "compiling" or "running" as the runner starts a step."""

COMPILE_ONLY_FLAG = "not run: --compile-only"
"""What the runner says of a run step it was told to skip; a try result says why instead."""


def gpu_seconds(records: list[dict[str, Any]]) -> float:
    """Seconds the unit's programs held a GPU: its run (and ncu) steps that ran on one."""
    return round(
        sum(float(r.get("duration_s") or 0) for r in records if r.get("step") in ("run", "ncu") and r.get("gpu_name")), 3
    )


def _listings(records: list[dict[str, Any]], store: ArtifactStore | None) -> dict[str, dict[str, str]]:
    """{"sass": {target: text}, "ptx": {target: text}} from the compile records' kept artifacts."""
    out: dict[str, dict[str, str]] = {"sass": {}, "ptx": {}}
    if store is None:
        return out
    for r in records:
        for kind in ("sass", "ptx"):
            digest = (r.get("artifacts") or {}).get(kind)
            if not digest or r["target"] in out[kind]:
                continue
            try:
                text = store.get(digest)
            except ValueError:
                text = None
            if text is None:
                continue
            if len(text) > MAX_LISTING_CHARS:
                text = text[:MAX_LISTING_CHARS] + f"\n// [cut at {MAX_LISTING_CHARS} characters of {len(text)}]\n"
            out[kind][r["target"]] = text
    return out


def result_record(
    unit: Unit,
    try_id: str,
    records: list[dict[str, Any]],
    *,
    toolchain: dict[str, Any],
    gpus: list[dict[str, Any]],
    isolation: str | None,
    compile_only: str | None,
    listings: dict[str, dict[str, str]],
    duration_s: float,
    executor: str,
    fault: str | None = None,
) -> dict[str, Any]:
    """The finished try result: the evidence-shaped records of every step plus what a reader needs around them."""
    statuses = [str(r["status"]) for r in records] or ["error"]
    return {
        "id": try_id,
        "status": "error" if fault else worst(statuses, default="error"),
        "records": records,  # one per target × step, the shape of evidence records (page `try`, snippet `try:ID`)
        "sass": listings.get("sass", {}),  # normalised SASS per target, when the build kept it
        "ptx": listings.get("ptx", {}),  # normalised PTX per target
        "toolchain": toolchain,  # the tools and versions that built it
        "gpus": gpus,  # GPUs seen where it ran ([] where there are none)
        "isolation": isolation,  # the sandbox in force (bwrap unless the operator chose otherwise)
        "compile_only": compile_only,  # why nothing ran, or None when programs were run where they could be
        "warnings": unit.warnings,  # what reading the fence warned about
        "fault": fault,  # an infrastructure fault (no sandbox, no compiler): the same content asked again runs again
        "duration_s": round(duration_s, 3),
        "gpu_seconds": gpu_seconds(records),
        "executor": executor,  # local (the service's pool) or queue (a GPU worker)
        "lang": unit.snippet.lang,
        "targets": unit.targets,
        "attributes": unit.attributes,
        "source": unit.snippet.full_source,
        "snippet_id": unit.snippet_id,
        "content_hash": unit.snippet.content_hash,
        "not_evidence": NOT_EVIDENCE,
    }


def execute(
    unit: Unit,
    try_id: str,
    *,
    compile_only: str | None,
    toolchain: Any,
    gpus: list[Any] | None,
    isolation: str | None,
    work_dir: Path,
    executor: str,
    on_event: OnEvent | None = None,
) -> dict[str, Any]:
    """Build (and, unless `compile_only` says why not, run) the unit through `runner.verify.verify`; never raises.

    `work_dir` holds the try runs' own runner cache and kept SASS/PTX."""
    from runner.verify import verify

    snippet = with_id(unit.snippet, try_id)
    started = time.monotonic()
    told: set[str] = set()

    def on_step(_snippet_id: str, target: str, step: str) -> None:
        name = {"compile": "compiling", "run": "running"}.get(step)
        if name is None or on_event is None:
            return
        if name == "running" or name not in told:
            told.add(name)
            on_event(name, {"target": target})

    artifacts = ArtifactStore(work_dir / "artifacts")
    try:
        report = verify(
            ".",
            snippets=[snippet],
            targets=unit.targets,
            jobs=1,
            use_cache=True,
            compile_only=compile_only is not None,
            cache_dir=work_dir / "cache",
            toolchain=toolchain,
            gpus=gpus,
            isolation=isolation,
            artifacts=artifacts,
            on_step=on_step,
        )
    except Exception as exc:  # noqa: BLE001 - no sandbox, no toolchain: said in the result, and not kept as final
        log.warning("try run %s could not run: %s", try_id, exc)
        return result_record(
            unit,
            try_id,
            [],
            toolchain=getattr(toolchain, "to_dict", dict)(),
            gpus=[],
            isolation=None,
            compile_only=compile_only,
            listings={},
            duration_s=time.monotonic() - started,
            executor=executor,
            fault=f"{type(exc).__name__}: {exc}",
        )
    records = [r.to_dict() for r in report.records]
    for r in records:
        if compile_only and r["step"] == "run" and r["status"] == "skipped" and r["message"] == COMPILE_ONLY_FLAG:
            r["message"] = f"not run: {compile_only}"
    return result_record(
        unit,
        try_id,
        records,
        toolchain=report.toolchain,
        gpus=report.gpus,
        isolation=report.isolation,
        compile_only=compile_only,
        listings=_listings(records, artifacts),
        duration_s=time.monotonic() - started,
        executor=executor,
    )
