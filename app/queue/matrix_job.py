"""One matrix job on a CPU worker: compile a snippet × target with one CUDA release, post the cells (issue 24).

`MatrixRuntime.handle` is what the queue's `kernelwiki.matrix` task calls (app/queue/tasks.py). A
worker holds the releases it serves (`kernelwiki worker --toolchains 13.0,13.1`, or every installed
one) and consumes their queues (`matrix-13.0`, `matrix-13.1`). The compile is the runner's,
compile-only, with the runner's result cache keyed by the toolchain's fingerprint; the cells
(runner/matrix.py `cells_from_records`) and the SASS/PTX they name go to the service
(`POST /api/matrix/cells`, runner token). A job whose stored cell was observed for the same
content with a toolchain of the same fingerprint is skipped unless forced.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.queue.client import EvidenceClient, EvidenceRefused

log = logging.getLogger("kernelwiki.worker")

CompileFn = Callable[[dict[str, Any], str, str], tuple[list[dict[str, Any]], dict[str, str]]]
"""compile(snippet as Snippet.to_dict(), target, release) → (cells as dicts, sha256 → listing text)."""


def held_toolchains(names: list[str], root: Path) -> dict[str, Any]:
    """Release → runner Toolchain for each name (`13.1`, or `all`/`installed`: every installed release).

    Raises runner.toolchains.ToolchainError naming a release that is not installed."""
    from runner.toolchains import ToolchainError, installed_releases, select_toolchain

    wanted: list[str] = []
    for name in names:
        for part in name.split(","):
            part = part.strip()
            if part in ("all", "installed"):
                wanted += installed_releases(root)
            elif part:
                wanted.append(part)
    if not wanted:
        raise ToolchainError(f"no toolchain to serve: none is installed under {root} (`kernelwiki toolchains install 13.1`)")
    held: dict[str, Any] = {}
    for name in dict.fromkeys(wanted):
        tc = select_toolchain(name, root)
        held[tc.nvcc_release or name] = tc
    return held


def runner_compile(toolchains: dict[str, Any], cache_dir: Path, isolation: str | None = None) -> CompileFn:
    """Compile-only verification by the runner with the held release, keeping SASS/PTX under `cache_dir/artifacts`."""

    def compile_cells(snippet: dict[str, Any], target: str, release: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
        from runner.artifacts import ArtifactStore
        from runner.matrix import cells_from_records
        from runner.verify import verify
        from snippets.snippet import Snippet

        tc = toolchains[release]
        store = ArtifactStore(cache_dir / "artifacts")
        report = verify(
            ".",
            targets=[target],
            snippets=[Snippet.from_dict(snippet)],
            jobs=1,
            compile_only=True,
            cache_dir=cache_dir,
            toolchain=tc,
            isolation=isolation,
            artifacts=store,
        )
        cells = cells_from_records(report.records, release, tc)
        listings: dict[str, str] = {}
        for c in cells:
            for digest in (c.sass, c.ptx):
                text = store.get(digest) if digest else None
                if digest and text is not None:
                    listings[digest] = text
        return [c.to_dict() for c in cells], listings

    return compile_cells


@dataclass
class MatrixRuntime:
    """What a matrix worker's jobs run with."""

    fingerprints: dict[str, str]  # release → its toolchain's fingerprint (the job's toolchain stamp)
    client: EvidenceClient
    compile: CompileFn
    name: str = field(default_factory=socket.gethostname)  # asked when a runtime is made, not at import

    @property
    def releases(self) -> list[str]:
        return list(self.fingerprints)

    def handle(self, job_id: int, job: dict[str, Any]) -> str:
        """Compile one snippet × target with the job's release unless its cell is current; post the cells."""
        sid, target, release = job["snippet_id"], job["target"], job["release"]
        where = f"{sid}@{target} with CUDA {release}"
        if release not in self.fingerprints:
            raise RuntimeError(f"{where}: this worker holds {', '.join(self.releases)}, not {release}")
        if not job.get("force") and job.get("stamp") == self.fingerprints[release]:
            return f"skipped {where}: its cell is current (same content, same toolchain)"
        cells, listings = self.compile(job["snippet"], target, release)
        if not cells:
            raise RuntimeError(f"the runner produced no cell for {where}")
        try:
            result = self.client.post_matrix({"cells": cells, "fingerprint": self.fingerprints[release], "artifacts": listings})
        except EvidenceRefused as exc:  # final: a retry would be refused the same way
            log.warning("%s: the service refused the cells: %s", where, exc)
            return f"refused {where}: {exc}"
        statuses = ",".join(f"{c['target']}={c['status']}" for c in cells)
        return f"{where}: {statuses} ({result.get('inserted', 0)} new, {result.get('replaced', 0)} replaced)"
