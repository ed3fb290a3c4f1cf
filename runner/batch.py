"""One nvcc run for all the targets of a cuda snippet, split back into exactly what each target's own run gives.

A cuda block is built once per target (runner/compile.py). Most of an nvcc run
is target-independent (preprocessing, the host compile of the prelude's CUDA
headers, the host link), so compiling a block for its N targets in one run with
N `-gencode` options costs little more than compiling it for one. `TargetBatch`
does that, lazily, the first time any of its targets asks, and hands each
target its part: a `ProcessResult` whose output is the front-end text plus
that target's own ptxas report, and that target's kept files (PTX,
preprocessed source, cubin) copied into the target's build folder. The rest of
the build (coverage check, regex checks, SASS, records) runs per target as
before, on the same files a single-target run keeps.

A batch is only used where it cannot change a result: the shared run passed,
wrote nothing to stdout, and its stderr splits into one ptxas report per target
in `-gencode` order, each naming no other target. Anything else (a failure, a
warning outside ptxas's report, a timeout) answers None and every target is
built on its own, so its diagnosis, status and output are exactly those of a
single-target build.

Two shared runs exist: the relocatable `-rdc=true` build every block gets (device code alone for a `run`
block, runner/compile.py `rdc_device_only`),
and (for `compile_only`, where nothing runs) the whole-program build of a `run`
block; that one keeps its per-target cubins for the SASS checks. A program
that is run is always built for its own target alone, so the binary that runs
is the one a user would build.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

from runner.compile import (
    BASE_NVCC_FLAGS,
    EXECUTABLE,
    PROGRAM_KEEP_DIR,
    PROGRAM_NVCC_FLAGS,
    RDC_OBJECT,
    compile_step,
    gencode,
    rdc_device_only,
    snippet_nvcc_flags,
)
from runner.output import CapturedOutput
from runner.resources import split_ptxas_report
from runner.sandbox import ProcessResult, new_workdir, remove_workdir
from runner.toolchain import Toolchain
from snippets.build import build_translation_unit
from snippets.snippet import Snippet

_KEPT = ("ptx", "cpp1.ii", "cubin")
"""Per-target files nvcc keeps (`snippet.compute_90a.ptx`, …) that a target's build reads."""


def batchable(snippet: Snippet, targets: list[str]) -> bool:
    """A cuda block that should compile (not compile_fail: its expected failure is judged per target) for ≥ 2 targets."""
    return snippet.lang == "cuda" and snippet.mode in ("compile", "run") and len(set(targets)) >= 2


@dataclasses.dataclass
class _Shared:
    """A finished shared run: the result to copy per target and the folder its kept files are in."""

    result: ProcessResult  # with the files it handed back through the sandbox (result.artifacts)
    stderr_parts: dict[str, str]
    folder: Path


class TargetBatch:
    """The shared nvcc runs of one snippet for `targets`; thread-safe, each run made at most once."""

    def __init__(
        self, snippet: Snippet, targets: list[str], toolchain: Toolchain, *, programs: bool, isolation: str | None = None
    ) -> None:
        self.snippet = snippet
        self.targets = list(dict.fromkeys(targets))
        self.toolchain = toolchain
        self.programs = programs and snippet.mode == "run"
        self.isolation = isolation
        self._lock = threading.Lock()
        self._runs: dict[str, _Shared | None] = {}
        self._folders: list[Path] = []
        self._taken: dict[str, set[str]] = {}

    def rdc_result(self, target: str, workdir: Path) -> ProcessResult | None:
        """The relocatable build's result for `target`, its kept files copied to `workdir`/keep; None: build alone."""
        return self._part("rdc", target, workdir / "keep")

    def program_result(self, target: str, workdir: Path) -> ProcessResult | None:
        """The whole-program build's result for `target` (compile-only), its cubin kept in `workdir`/PROGRAM_KEEP_DIR."""
        if not self.programs:
            return None
        return self._part("program", target, workdir / PROGRAM_KEEP_DIR)

    def _part(self, kind: str, target: str, into: Path) -> ProcessResult | None:
        if target not in self.targets or not self.toolchain.nvcc:
            return None
        with self._lock:
            if kind not in self._runs:
                self._runs[kind] = self._run(kind)
            shared = self._runs[kind]
            if shared is None:
                return None
            into.mkdir(parents=True, exist_ok=True)
            number = target.removeprefix("sm_")
            keep_dir = into.name
            artifacts: dict[str, bytes] = {}
            for name, data in shared.result.artifacts.items():
                folder, _, base = name.rpartition("/")
                if not folder:
                    artifacts[name] = data  # the source as the shared run saw it (the tamper check)
                elif base in {f"snippet.compute_{number}.{suffix}" for suffix in _KEPT}:
                    artifacts[f"{keep_dir}/{base}"] = data
                    if base.endswith(".cubin"):  # the SASS step reads it inside the target's own sandbox
                        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                        with os.fdopen(os.open(into / base, flags, 0o644), "wb") as fh:
                            fh.write(data)
            taken = self._taken.setdefault(kind, set())
            taken.add(target)
            if taken >= set(self.targets):  # every target has its part: the shared folder can go
                remove_workdir(shared.folder)
            stderr = CapturedOutput(text=shared.stderr_parts[target], total_bytes=len(shared.stderr_parts[target]))
            return dataclasses.replace(shared.result, stdout=CapturedOutput(), stderr=stderr, artifacts=artifacts)

    def _run(self, kind: str) -> _Shared | None:
        workdir = new_workdir("kw-batch-")
        self._folders.append(workdir)
        tu = build_translation_unit(self.snippet)
        tu.write(workdir)
        gencodes = [gencode(t) for t in self.targets]
        if kind == "rdc":
            keep = workdir / "keep"
            argv = [
                self.toolchain.nvcc or "nvcc",
                *gencodes,
                *BASE_NVCC_FLAGS,
                *snippet_nvcc_flags(self.snippet, compile_only=self.snippet.mode != "run"),
                tu.filename,
                *(rdc_device_only(len(self.targets)) if self.snippet.mode == "run" else RDC_OBJECT),
            ]
        else:
            keep = workdir / PROGRAM_KEEP_DIR
            argv = [
                self.toolchain.nvcc or "nvcc",
                *gencodes,
                *PROGRAM_NVCC_FLAGS,
                "-keep",
                "-keep-dir",
                PROGRAM_KEEP_DIR,
                *snippet_nvcc_flags(self.snippet, compile_only=False),
                tu.filename,
                "-o",
                EXECUTABLE,
            ]
        keep.mkdir()
        res = compile_step(argv, workdir, tu, self.isolation, collect=tuple(f"{keep.name}/*.{suffix}" for suffix in _KEPT))
        clean = not (res.error or res.timed_out or res.exit_code != 0 or res.truncated or res.stdout.text.strip())
        parts = split_ptxas_report(res.stderr.text, self.targets) if clean else None
        if parts is None:
            remove_workdir(workdir)
            return None
        return _Shared(res, parts, workdir)

    def cleanup(self) -> None:
        """Remove every shared folder (those not already removed when the last target took its part)."""
        for folder in self._folders:
            remove_workdir(folder)
