"""Building a snippet for one target, so that a pass means its code really was assembled for it.

How every device function reaches ptxas (the false pass this module exists to prevent):

1. `snippets/build.py` redefines `__device__` after the prelude as
   `__location__(device) __attribute__((used))`: every `__device__` function,
   variable and lambda written in the block, `static`, `inline`,
   `__forceinline__` and anonymous-namespace ones included, is emitted into the
   PTX although nothing calls it (headers included by the block keep the
   original macro).
2. cuda blocks are compiled with `-rdc=true`: in relocatable mode ptxas
   generates code for every emitted function, not only for what a kernel
   reaches (in whole-program mode it parses unreferenced functions but does not
   code-generate them).
3. After a clean build, runner/coverage.py checks that every `asm(…)`
   statement of the block (read from nvcc's preprocessed source *for this
   target*) appears in the PTX's inline-asm regions. A statement that does not
   (an uninstantiated template, a discarded `if constexpr` branch, code the
   optimizer removed) makes the result `unverified`, never `pass`.

Not covered: device code that is not inline asm inside a template that is never
instantiated (it has no code for any target: the front end still parses it), and
asm templates built at run time from non-literal strings.

Compile commands (all with `-Xptxas -v` for the resource report, `-lineinfo`
for `.loc` line mapping, and `-keep` to read the PTX and preprocessed source):

* cuda, compile:  `nvcc -gencode=arch=compute_90a,code=sm_90a -rdc=true -c snippet.cu`
* cuda, run:      the relocatable build of the device code alone (`-rdc=true -cubin`: the host half
                  of the build is the whole-program build's job, below), then `nvcc -gencode=…
                  snippet.cu -o program` (whole-program, no -rdc) for the executable that runs and
                  whose SASS is checked
* cuda, several targets under `verify --compile-only`: one run of each of the above with every
                  target's -gencode, split back per target (runner/batch.py), or per target where
                  that split could differ from a target's own build
* cpp:            `nvcc snippet.cpp` (host code; CUDA headers and cudart available)
* ptx module:     `ptxas -arch=sm_90a -v snippet.ptx`
* python:         `compile()` of the source in a fresh `python3 -I`
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runner import diagnostics as dx
from runner.coverage import regex_checks, unassembled_asm
from runner.outcome import StepOutcome, outcome_from_process
from runner.output import cap_text
from runner.resources import parse_ptxas_resources
from runner.sandbox import (
    COMPILE_LIMITS,
    ProcessResult,
    new_workdir,
    paths_outside_sandbox,
    remove_workdir,
    run_process,
)
from runner.toolchain import Toolchain
from snippets.build import SEGMENT_SNIPPET, TranslationUnit, build_translation_unit, is_complete_ptx_module
from snippets.snippet import Snippet


class SharedBuilds(Protocol):
    """A snippet's targets built in shared nvcc runs (runner/batch.py's TargetBatch), as a build asks for them."""

    def rdc_result(self, target: str, workdir: Path) -> ProcessResult | None:
        """The relocatable build's result for `target`; None: build it alone."""

    def program_result(self, target: str, workdir: Path) -> ProcessResult | None:
        """The whole-program build's result for `target`; None: build it alone."""


COMPILE_TIMEOUT_S = 240
"""Wall-clock limit of one nvcc / ptxas / python compile."""

SASS_TIMEOUT_S = 120
"""Wall-clock limit of one disassembly (`cuobjdump -sass`, `nvdisasm`)."""

FAILED_OUTPUT_BYTES = 8192
"""Output of a failed disassembly kept in its record (head and tail)."""

SASS_OUTPUT_CAP = 32 * 1024 * 1024
"""SASS is read whole up to this size (a regex over truncated SASS would be meaningless)."""

BASE_NVCC_FLAGS = ("-rdc=true", "-lineinfo", "-Xptxas", "-v", "-keep", "-keep-dir", "keep", "-diag-suppress", "177")
"""Flags of every cuda build (177: 'declared but never referenced', noise once every function is kept)."""

PROGRAM_NVCC_FLAGS = ("-lineinfo", "-Xptxas", "-v", "-diag-suppress", "177")
"""Flags of the whole-program build of a `run` block (no -rdc: as a user builds it)."""

RDC_OBJECT = ("-c", "-o", "snippet.o")
"""How the relocatable build of a `compile` (or `compile_fail`) block ends: device and host code, one object."""


def rdc_device_only(targets: int) -> tuple[str, ...]:
    """How the relocatable build of a `run` block ends: the device code alone (`-cubin`; `-fatbin` for several
    targets, each target's cubin kept in keep/). Its host code is compiled, and linked, by the whole-program build
    that follows; compiling it here too (cudafe++ and the host compiler: about 60 % of an nvcc run) would do that
    half of the work twice. The device side (preprocessed source, PTX, ptxas report, cubin) is the same either way,
    and a front-end error in host code is still reported here (the device pass parses the whole unit)."""
    return ("-cubin", "-o", "keep/snippet.cubin") if targets == 1 else ("-fatbin", "-o", "snippet.fatbin")


PROGRAM_KEEP_DIR = "keep-program"
"""Where a shared whole-program build (runner/batch.py) leaves a target's cubin."""

EXECUTABLE = "snippet"
"""File name of a built program inside the build folder."""

RDC_KEPT = ("keep/*.ptx", "keep/*.cpp1.ii", "keep/*.cubin")
"""What the relocatable build hands back through the sandbox (runner/launch.py): PTX, preprocessed source, cubin."""

TAMPERED = "tampered"
"""Failure kind of a build whose source was not, after the compile, the text on the page."""


def snippet_nvcc_flags(snippet: Snippet, *, compile_only: bool) -> list[str]:
    """The block's own `flags=`, less -lcuda when nothing is linked and less what a cuda build sets itself."""
    flags = [f for f in snippet.flags if not (compile_only and f == "-lcuda")]
    if snippet.lang == "cuda":
        flags = [f for f in flags if f not in ("-rdc=true", "-lineinfo")]
    return flags


@dataclass
class Build:
    """A build folder and what is in it; the caller removes `workdir` when done."""

    outcome: StepOutcome  # the compile step's result
    workdir: Path  # private temporary folder of this build
    tu: TranslationUnit  # the compiled source and its line map
    program: list[str] | None = None  # files of a run, first the one to start (executable or script)
    program_files: dict[str, bytes] = field(default_factory=dict)  # their bytes, handed back through the sandbox
    device_binary: Path | None = None  # cubin / object / executable holding the SASS (read only inside the sandbox)
    ptx: str | None = None  # generated PTX (cuda) or the module (ptx)
    no_program: str = ""  # why a clean build has no program to run (an NVRTC device-only build, runner/nvrtc.py)

    def cleanup(self) -> None:
        remove_workdir(self.workdir)


def gencode(target: str) -> str:
    """`sm_90a` → `-gencode=arch=compute_90a,code=sm_90a`."""
    number = target.removeprefix("sm_")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def _first(res: ProcessResult, suffix: str) -> str | None:
    """The first handed-back file whose name ends in `suffix`, as text (runner/launch.py read it in the sandbox)."""
    for name in sorted(res.artifacts):
        if name.endswith(suffix):
            return res.artifacts[name].decode("utf-8", "replace")
    return None


def _first_name(res: ProcessResult, suffix: str) -> str | None:
    return next((name for name in sorted(res.artifacts) if name.endswith(suffix)), None)


def compile_step(
    argv: list[str], workdir: Path, tu: TranslationUnit, isolation: str | None, collect: tuple[str, ...] = ()
) -> ProcessResult:
    """One compile step in the sandbox under the compile limits: the source is bound read-only and handed
    back (for the tamper check) with the files named in `collect`."""
    return run_process(
        argv,
        workdir,
        COMPILE_TIMEOUT_S,
        limits=COMPILE_LIMITS,
        isolation=isolation,
        collect=(tu.filename, *collect),
        protect=(tu.filename, *tu.companions),
    )


def disassembly_step(argv: list[str], workdir: Path, isolation: str | None, extra_env: dict[str, str]) -> ProcessResult:
    """One disassembler run (`cuobjdump -sass`, `nvdisasm`) in the sandbox under the compile limits, its listing read
    whole up to SASS_OUTPUT_CAP (`stdout.truncated` beyond it: a check over a cut listing would mean nothing)."""
    return run_process(
        argv,
        workdir,
        SASS_TIMEOUT_S,
        limits=COMPILE_LIMITS,
        isolation=isolation,
        extra_env=extra_env,
        head_bytes=SASS_OUTPUT_CAP,
        tail_bytes=1024,
    )


def source_digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def tampered(res: ProcessResult, tu: TranslationUnit) -> str | None:
    """Why the source a command saw is not the page's text (read back through the sandbox after it ran), or None."""
    if res.error and not res.artifacts and not res.refused:
        return None  # it never ran
    seen = res.artifacts.get(tu.filename)
    if seen is None:
        why = res.refused.get(tu.filename, "gone")
        return f"the source {tu.filename} could not be read back after the compile ({why}): the result is not for the page's text"
    if source_digest(seen) != source_digest(tu.text):
        return f"the source {tu.filename} changed during the compile: the result is not for the page's text"
    return None


def _mark_tampered(outcome: StepOutcome, why: str) -> None:
    outcome.status, outcome.kind, outcome.detail = "fail", TAMPERED, why
    outcome.checks = []


def _fail_from(outcome: StepOutcome, snippet: Snippet, diag: dx.Diagnosis, combined_output: str) -> StepOutcome:
    """Set the outcome of a build that failed, honouring compile_fail."""
    outcome.kind, outcome.segment, outcome.segment_line = diag.kind, diag.segment, diag.segment_line
    if snippet.mode == "compile_fail":
        expected = snippet.expect or ""
        if expected.lower() in combined_output.lower():
            outcome.status = "xfail"
            outcome.detail = f"failed to compile as expected ({diag.kind}: {diag.message})"
        else:
            outcome.status = "fail"
            outcome.detail = (
                f"failed to compile, but the output lacks the expected text '{expected}'; first error: {diag.message}"
            )
        return outcome
    outcome.status = "fail"
    outcome.detail = diag.message
    return outcome


def build_snippet(
    snippet: Snippet,
    target: str,
    toolchain: Toolchain,
    *,
    want_program: bool,
    isolation: str | None = None,
    batch: SharedBuilds | None = None,
) -> Build:
    """Compile `snippet` for `target` in a fresh folder; `want_program` links an executable for a run.

    `batch` (runner/batch.py) shares one nvcc run among the snippet's targets where that gives the
    same result; where it cannot, this target is built alone as without it.
    """
    workdir = new_workdir("kw-build-")
    tu = build_translation_unit(snippet)
    tu.write(workdir)
    build = Build(outcome=StepOutcome(step="compile", status="error"), workdir=workdir, tu=tu)
    lang = snippet.lang
    if lang == "ptx":
        return _build_ptx(build, snippet, target, toolchain, isolation)
    if lang == "python":
        return _build_python(build, snippet, toolchain, isolation, want_program)
    if not toolchain.nvcc:
        build.outcome.detail = "nvcc not found: " + "; ".join(toolchain.notes)
        return build
    compile_only = not want_program or snippet.mode == "compile_fail"
    argv = [toolchain.nvcc]
    flags = snippet_nvcc_flags(snippet, compile_only=compile_only)
    if lang == "cuda":
        argv += [gencode(target), *BASE_NVCC_FLAGS]
        (workdir / "keep").mkdir()
    argv += flags + [tu.filename]
    # cuda: the relocatable build proves every device function assembles; a program is then
    # built again whole-program (below), because that is how it really runs (ptxas ignores
    # setmaxnreg under -rdc, for one).
    if lang == "cuda":
        argv += RDC_OBJECT if compile_only else rdc_device_only(1)
    else:
        argv += RDC_OBJECT if compile_only else ["-o", EXECUTABLE]
    shared = batch.rdc_result(target, workdir) if batch is not None and lang == "cuda" else None
    kept = RDC_KEPT if lang == "cuda" else ()
    res = shared or compile_step(
        argv, workdir, tu, isolation, collect=(*kept, *(() if compile_only or lang == "cuda" else (EXECUTABLE,)))
    )
    ptx = _first(res, ".ptx") if lang == "cuda" else None
    outcome = outcome_from_process(res, resources=parse_ptxas_resources(res.output) if lang == "cuda" else {})
    outcome.warnings = dx.meaning_warnings(res.output, dx.RDC_BUILD if lang == "cuda" else "")
    build.outcome, build.ptx = outcome, ptx
    changed = tampered(res, tu)
    if changed:
        _mark_tampered(outcome, changed)
        return build
    if res.error:
        outcome.status, outcome.detail = "error", f"could not run nvcc: {res.error}"
        return build
    if res.timed_out:
        outcome.status, outcome.kind = "timeout", dx.TIMEOUT
        outcome.detail = f"nvcc did not finish within {COMPILE_TIMEOUT_S} s (killed with its process group)"
        return build
    if res.exit_code != 0:
        diag = _outside_sandbox(dx.diagnose_build(res.output, lang, tu, ptx), res.output, workdir)
        if res.signal is not None and diag.kind == dx.DEVICE_COMPILE_ERROR:
            diag = dx.Diagnosis(dx.COMPILER_CRASH, f"nvcc was killed by {res.signal_name}")
        _fail_from(outcome, snippet, diag, res.output)
        return build
    if snippet.mode == "compile_fail":
        outcome.status = "fail"
        outcome.detail = f"compiled cleanly, but compile_fail expects an error containing '{snippet.expect}'"
        return build
    if lang == "cuda":
        preprocessed = _first(res, ".cpp1.ii")
        if preprocessed is None or ptx is None:
            outcome.status = "error"
            outcome.detail = "nvcc kept no PTX or preprocessed source: cannot confirm that every asm statement reached ptxas"
            return build
        missing = unassembled_asm(preprocessed, ptx, SEGMENT_SNIPPET)
        if missing:
            first = missing[0]
            names = ", ".join(sorted({m for s in missing for m in s.mnemonics}))[:200]
            outcome.status, outcome.kind = "unverified", dx.NOT_ASSEMBLED
            outcome.segment, outcome.segment_line = SEGMENT_SNIPPET, first.line
            outcome.detail = (
                f"{len(missing)} inline asm statement(s) never reached ptxas for {target} ({names}): "
                "code in a template that is never instantiated, or removed by the compiler, is not verified; "
                "instantiate it (a hidden `//! ` line will do)"
            )
            return build
        _apply_regex_checks(outcome, snippet, "ptx", ptx)
        cubin = _first_name(res, ".cubin")
        if cubin is None:  # a pass must name a cubin that came back: code where nvcc runs could leave a link in its place
            why = next(
                (f"{name}: {reason}" for name, reason in sorted(res.refused.items()) if name.endswith(".cubin")), "not written"
            )
            outcome.status, outcome.detail = "error", f"nvcc reported success but its cubin could not be read back ({why})"
            return build
        build.device_binary = workdir / cubin
        if not compile_only and outcome.status == "pass":
            _link_whole_program(build, snippet, target, toolchain.nvcc, flags, isolation, batch)
    if not compile_only and build.outcome.status == "pass" and lang == "cpp":
        build.program_files = {EXECUTABLE: res.artifacts.get(EXECUTABLE, b"")}
    if not compile_only and build.outcome.status == "pass":
        build.program = [EXECUTABLE]
    return build


def _link_whole_program(
    build: Build,
    snippet: Snippet,
    target: str,
    nvcc: str,
    flags: list[str],
    isolation: str | None,
    batch: SharedBuilds | None = None,
) -> None:
    """Build the executable that runs, in whole-program mode, as a user would; its resources replace the -rdc ones."""
    argv = [nvcc, gencode(target), *PROGRAM_NVCC_FLAGS, *flags, build.tu.filename, "-o", EXECUTABLE]
    shared = batch.program_result(target, build.workdir) if batch is not None else None
    res = shared or compile_step(argv, build.workdir, build.tu, isolation, collect=(EXECUTABLE,))
    outcome = build.outcome
    changed = tampered(res, build.tu)
    if changed:
        _mark_tampered(outcome, changed)
        return
    if res.error or res.timed_out or res.exit_code != 0:
        diag = dx.diagnose_build(res.output, snippet.lang, build.tu, build.ptx)
        if res.timed_out:
            outcome.status, outcome.kind = "timeout", dx.TIMEOUT
            outcome.detail = f"nvcc (whole-program build) did not finish within {COMPILE_TIMEOUT_S} s"
        elif res.error:
            outcome.status, outcome.detail = "error", f"could not run nvcc: {res.error}"
        else:
            _fail_from(outcome, snippet, diag, res.output)
        return
    outcome.command = f"{outcome.command} && {shlex.join(res.argv)}"
    resources = parse_ptxas_resources(res.output)
    if resources:
        outcome.resources = resources
    outcome.warnings += dx.meaning_warnings(res.output, dx.PROGRAM_BUILD)
    kept = _first_name(res, ".cubin") if shared else None
    build.device_binary = build.workdir / kept if kept else build.workdir / EXECUTABLE  # shared: this target's cubin
    if not shared:
        build.program_files = {EXECUTABLE: res.artifacts.get(EXECUTABLE, b"")}


OUTSIDE_SANDBOX = "outside the sandbox"
"""Failure kind of a build that tried to read a host file (`#include "/etc/…"`): the sandbox shows none."""


def _outside_sandbox(diag: dx.Diagnosis, output: str, workdir: Path) -> dx.Diagnosis:
    """Say so when a failed build tried to include a file outside the sandbox (it saw nothing of it)."""
    outside = paths_outside_sandbox(output, workdir)
    if not outside:
        return diag
    message = f'#include "{outside[0]}" is outside the sandbox: a snippet sees only its own folder and the toolchain'
    return dx.Diagnosis(OUTSIDE_SANDBOX, message, diag.segment, diag.segment_line)


def _apply_regex_checks(outcome: StepOutcome, snippet: Snippet, kind: str, text: str) -> None:
    results = regex_checks(snippet.checks, kind, text)
    outcome.checks.extend(results)
    failed = [r for r in results if not r["ok"]]
    if failed and outcome.status == "pass":
        outcome.status = "fail"
        outcome.kind = f"{kind} check failed"
        outcome.detail = "; ".join(f'{r["kind"]}="{r["pattern"]}": {r["detail"]}' for r in failed)


def _build_ptx(build: Build, snippet: Snippet, target: str, toolchain: Toolchain, isolation: str | None) -> Build:
    module = build.tu.text
    if not is_complete_ptx_module(module):
        build.outcome = StepOutcome(
            step="compile", status="unverified", detail="PTX fragment: not a complete module", kind="not verifiable"
        )
        return build
    if not toolchain.ptxas:
        build.outcome.detail = "ptxas not found"
        return build
    argv = [toolchain.ptxas, f"-arch={target}", "-v", "-o", "snippet.cubin", build.tu.filename]
    res = compile_step(argv, build.workdir, build.tu, isolation)
    outcome = outcome_from_process(res, resources=parse_ptxas_resources(res.output))
    outcome.warnings = dx.meaning_warnings(res.output)
    build.outcome, build.ptx = outcome, module
    changed = tampered(res, build.tu)
    if changed:
        _mark_tampered(outcome, changed)
    elif res.error:
        outcome.status, outcome.detail = "error", f"could not run ptxas: {res.error}"
    elif res.timed_out:
        outcome.status, outcome.kind, outcome.detail = "timeout", dx.TIMEOUT, f"ptxas did not finish within {COMPILE_TIMEOUT_S} s"
    elif res.exit_code != 0:
        _fail_from(outcome, snippet, dx.diagnose_build(res.output, "ptx", build.tu), res.output)
    elif snippet.mode == "compile_fail":
        outcome.status = "fail"
        outcome.detail = f"assembled cleanly, but compile_fail expects an error containing '{snippet.expect}'"
    else:
        _apply_regex_checks(outcome, snippet, "ptx", module)
        build.device_binary = build.workdir / "snippet.cubin"
    return build


_PY_CHECK = "import sys; src = open('snippet.py', encoding='utf-8').read(); compile(src, 'snippet.py', 'exec')"


def _build_python(build: Build, snippet: Snippet, toolchain: Toolchain, isolation: str | None, want_program: bool) -> Build:
    argv = [toolchain.python, "-I", "-c", _PY_CHECK]
    res = compile_step(argv, build.workdir, build.tu, isolation)
    outcome = outcome_from_process(res)
    build.outcome = outcome
    changed = tampered(res, build.tu)
    if changed:
        _mark_tampered(outcome, changed)
    elif res.error:
        outcome.status, outcome.detail = "error", f"could not run python: {res.error}"
    elif res.timed_out:
        outcome.status, outcome.kind, outcome.detail = "timeout", dx.TIMEOUT, "python did not finish compiling in time"
    elif res.exit_code != 0:
        _fail_from(outcome, snippet, dx.diagnose_build(res.output, "python", build.tu), res.output)
    elif snippet.mode == "compile_fail":
        outcome.status = "fail"
        outcome.detail = f"compiled cleanly, but compile_fail expects an error containing '{snippet.expect}'"
    elif want_program:
        build.program = [build.tu.filename, *build.tu.companions]
        build.program_files = {build.tu.filename: build.tu.text.encode("utf-8")}  # the page's text, never read back
        build.program_files.update({name: text.encode("utf-8") for name, text in build.tu.companions.items()})
    return build


def sass_step(build: Build, snippet: Snippet, target: str, toolchain: Toolchain, isolation: str | None = None) -> StepOutcome:
    """Run the block's sass=/no_sass= checks on what was built (skipped, never passed, without the tools)."""
    if build.outcome.status != "pass" or build.device_binary is None:
        return StepOutcome(step="sass", status="skipped", detail=f"not checked: the compile step is {build.outcome.status}")
    tool = toolchain.sass_tool
    if not tool:
        return StepOutcome(step="sass", status="skipped", detail=f"SASS not checked: {toolchain.sass_missing_reason}")
    env = {"NVDISASM_PATH": str(Path(toolchain.nvdisasm or "").parent)}
    res = disassembly_step([tool, "-sass", str(build.device_binary)], build.workdir, isolation, env)
    outcome = StepOutcome(
        step="sass",
        status="pass",
        exit_code=res.exit_code,
        duration_s=res.duration_s,
        isolation=res.isolation,
        command=shlex.join(res.argv),
    )
    if res.error or res.timed_out or res.exit_code != 0 or res.stdout.truncated:
        outcome.status = "error"
        reason = res.error or (
            "timed out" if res.timed_out else "output too large" if res.stdout.truncated else f"exit status {res.exit_code}"
        )
        outcome.detail = f"cuobjdump -sass failed: {reason}"
        outcome.output = cap_text(res.output, FAILED_OUTPUT_BYTES)[0]
        return outcome
    _apply_regex_checks(outcome, snippet, "sass", res.stdout.text)
    if outcome.status == "pass":
        outcome.detail = f"{len(outcome.checks)} SASS check(s) passed"
    return outcome
