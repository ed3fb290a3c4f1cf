"""The `ncu` step: a `run` block's `ncu=` assertions checked by Nsight Compute's counters.

After the run step passed on a GPU, the same program runs again under
`ncu --csv --metrics NAMES [-k regex:NAME]`, inside the same sandbox (bubblewrap,
seccomp filter, limits) as the run step. The argv is a list built from the
assertions that snippets.attributes.parse_ncu accepted (metric names from
[a-z0-9_.], kernel names from [A-Za-z0-9_]): nothing reaches a shell. The CSV is
read from the sandboxed command's captured stdout, never from a file.

Evaluation (docs/snippets.md): a metric's value over the run is the **sum over
every profiled kernel launch** (ncu-kernel= narrows which launches). A program
that launches its kernel once (the harness's `KERNELWIKI_PROFILE=1`, which this
step sets) therefore asserts on that one launch. No launch profiled, a metric
missing or not a number: the step fails, naming it. No GPU, no ncu binary, or
counters the driver refuses to the sandbox's user (ERR_NVGPUCTRPERM): the step is
`skipped` with the reason, never a pass. ncu stopped any other way (by the sandbox
or the seccomp filter, for instance) is an `error` whose detail quotes ncu's own
==ERROR== lines.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from dataclasses import dataclass, field

from runner.compile import Build
from runner.execute import program_argv, program_folder, run_on_gpu
from runner.gpus import Gpu
from runner.outcome import StepOutcome, outcome_from_process
from runner.toolchain import Toolchain
from snippets.attributes import InfoStringError, split_ncu
from snippets.snippet import Snippet

MAX_CSV_BYTES = 256 * 1024
"""Largest ncu CSV the parser reads (the run's stdout is capped before this anyway)."""

MAX_CSV_ROWS = 4096
"""Most metric rows (launches × metrics) the parser takes; more is an error, not a silent cut."""

NCU_TIMEOUT_FACTOR = 4
"""ncu replays kernels once per metric pass: the step gets this many times the block's run timeout."""

NCU_STATUS_MARKERS = ("==PROF==", "==ERROR==", "==WARNING==")
"""Line prefixes of ncu's own messages on stdout/stderr (kept for the detail of a failed step)."""

COUNTERS_RESTRICTED = "ERR_NVGPUCTRPERM"
"""ncu's error code when the driver restricts the performance counters to administrators."""

_HEADER_NEEDS = ("ID", "Kernel Name", "Metric Name", "Metric Value")
_NUMBER = re.compile(r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


class NcuCsvError(ValueError):
    """ncu's output is not the CSV this step expects; the message says where."""


@dataclass
class NcuRow:
    """One metric of one profiled launch."""

    launch: str  # ncu's launch ID ("0", "1", …)
    kernel: str  # the kernel's (demangled) name
    metric: str  # the metric name
    value: float  # its value as a number


@dataclass
class NcuReading:
    """What the step read: the rows, and ncu's own status lines."""

    rows: list[NcuRow] = field(default_factory=list)  # every metric row, in order
    messages: list[str] = field(default_factory=list)  # ==PROF==/==ERROR==/==WARNING== lines


def find_ncu(environ: dict[str, str] | None = None) -> str | None:
    """The ncu binary: KERNELWIKI_NCU, then PATH, then /usr/local/cuda/bin/ncu, a launcher script resolved to its install (None: not found)."""
    env = os.environ if environ is None else environ
    for candidate in (env.get("KERNELWIKI_NCU", "").strip() or None, shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return _behind_launcher(os.path.abspath(candidate))
    return None


NSIGHT_HOMES = ("{cuda}/nsight-compute-*", "/opt/nvidia/nsight-compute/*")
"""Where the CUDA toolkit's `bin/ncu` launcher looks for Nsight Compute itself ({cuda}: the toolkit folder)."""


def _behind_launcher(ncu: str) -> str:
    """The Nsight Compute install behind the toolkit's `bin/ncu` launcher script, else `ncu` itself.

    The launcher finds its install at run time (`<toolkit>/nsight-compute-*` or
    `/opt/nvidia/nsight-compute/*`), so the sandbox, which binds only the folders of
    the command's own program, would not see it: "nsight-compute directory is not
    found" (seen on the H200). Running the install's own `ncu` binds its folder.
    """
    try:
        with open(ncu, "rb") as f:
            if f.read(2) != b"#!":
                return ncu
    except OSError:
        return ncu
    cuda = os.path.dirname(os.path.dirname(os.path.realpath(ncu)))
    found = sorted(
        path
        for home in NSIGHT_HOMES
        for path in glob.glob(os.path.join(home.format(cuda=cuda), "ncu"))
        if os.access(path, os.X_OK)
    )
    return found[-1] if found else ncu


def ncu_argv(ncu: str, metrics: list[str], kernel: str | None, program: list[str]) -> list[str]:
    """The command line, as a list: `ncu --csv --metrics A,B [-k regex:NAME] PROGRAM…`."""
    argv = [ncu, "--csv", "--print-units", "base", "--clock-control", "none", "--metrics", ",".join(metrics)]
    if kernel:
        argv += ["-k", f"regex:{kernel}"]
    return argv + program


def _number(text: str) -> float | None:
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text.replace(",", ""))


def parse_ncu_csv(text: str) -> NcuReading:
    """Parse ncu's `--csv` output (program output and ncu's messages may come before it): the last header line
    naming ID, Kernel Name, Metric Name and Metric Value, then one quoted row per metric and launch.
    NcuCsvError when it is too large, has no header, or a row is malformed."""
    if len(text.encode("utf-8", "replace")) > MAX_CSV_BYTES:
        raise NcuCsvError(f"ncu output is larger than {MAX_CSV_BYTES} bytes")
    reading = NcuReading()
    lines = text.splitlines()
    header_at = None
    for i, line in enumerate(lines):
        if line.startswith(NCU_STATUS_MARKERS):
            reading.messages.append(line.strip()[:300])
        elif line.startswith('"ID"'):
            header_at = i
    if header_at is None:
        raise NcuCsvError("no CSV header from ncu (no kernel was profiled, or ncu failed)")
    header = next(csv.reader([lines[header_at]]))
    if any(name not in header for name in _HEADER_NEEDS):
        raise NcuCsvError(f"ncu CSV header lacks one of {', '.join(_HEADER_NEEDS)}")
    col = {name: header.index(name) for name in _HEADER_NEEDS}
    for n, row in enumerate(csv.reader(io.StringIO("\n".join(ln for ln in lines[header_at + 1 :] if ln.startswith('"')))), 1):
        if len(row) != len(header):
            raise NcuCsvError(f"ncu CSV row {n} has {len(row)} fields, the header {len(header)}")
        if len(reading.rows) >= MAX_CSV_ROWS:
            raise NcuCsvError(f"ncu CSV has more than {MAX_CSV_ROWS} metric rows")
        value = _number(row[col["Metric Value"]])
        if value is None:
            raise NcuCsvError(
                f"ncu CSV row {n}: {row[col['Metric Name']][:80]} = '{row[col['Metric Value']][:40]}' is not a number"
            )
        reading.rows.append(NcuRow(row[col["ID"]], row[col["Kernel Name"]][:200], row[col["Metric Name"]], value))
    return reading


def _compare(actual: float, op: str, want: float) -> bool:
    return {"==": actual == want, "<=": actual <= want, ">=": actual >= want, "<": actual < want, ">": actual > want}[op]


def evaluate(assertions: list[str], reading: NcuReading) -> list[dict[str, object]]:
    """One check per assertion: the metric summed over every profiled launch, compared with the value.
    A metric no launch reported fails its check."""
    launches = sorted({r.launch for r in reading.rows}, key=lambda x: (len(x), x))
    checks: list[dict[str, object]] = []
    for assertion in assertions:
        metric, op, want = split_ncu(assertion)
        values = [r.value for r in reading.rows if r.metric == metric]
        if not values:
            checks.append({"kind": "ncu", "pattern": assertion, "ok": False, "detail": f"{metric}: not reported by ncu"})
            continue
        total = float(sum(values))
        shown = int(total) if total.is_integer() else total
        ok = _compare(total, op, want)
        checks.append(
            {
                "kind": "ncu",
                "pattern": assertion,
                "ok": ok,
                "detail": f"{metric} = {shown} (sum over {len(values)} launch(es) of {len(launches)} profiled)",
            }
        )
    return checks


def ncu_step(
    build: Build,
    snippet: Snippet,
    gpu: Gpu | None,
    toolchain: Toolchain,
    isolation: str | None = None,
    ncu: str | None = None,
) -> StepOutcome:
    """Run the program of `build` under ncu on `gpu` and check the block's `ncu=` assertions (runner/ncu.py)."""
    assertions = list(snippet.checks.get("ncu", []))
    kernels = snippet.checks.get("ncu_kernel") or []
    kernel = kernels[0] if kernels else None
    if gpu is None:
        return StepOutcome(step="ncu", status="skipped", detail="not profiled: no GPU of this architecture here")
    ncu = ncu or find_ncu()
    if ncu is None:
        return StepOutcome(
            step="ncu", status="skipped", detail="not profiled: ncu not found (KERNELWIKI_NCU, PATH, /usr/local/cuda/bin)"
        )
    if not build.program or any(not build.program_files.get(n) for n in build.program):
        return StepOutcome(step="ncu", status="skipped", detail="not profiled: no program was built")
    try:
        metrics = sorted({split_ncu(a)[0] for a in assertions})
    except InfoStringError as exc:
        return StepOutcome(step="ncu", status="error", detail=f"refused by the runner: {exc}")
    with program_folder(build, "kw-ncu-") as rundir:
        program = program_argv(build, snippet, toolchain)
        res = run_on_gpu(
            ncu_argv(ncu, metrics, kernel, program),
            rundir,
            snippet.timeout * NCU_TIMEOUT_FACTOR,
            gpu,
            isolation,
            {"KERNELWIKI_PROFILE": "1"},
        )
    outcome = outcome_from_process(
        res, "ncu", gpu_name=gpu.name, compute_capability=gpu.compute_capability, driver_version=gpu.driver_version
    )
    outcome.resources["ncu"] = ncu
    messages = [ln.strip()[:300] for ln in res.output.splitlines() if ln.startswith(NCU_STATUS_MARKERS)]
    errors = [m for m in messages if m.startswith("==ERROR==")]
    if res.error:
        outcome.status, outcome.detail = "error", f"could not run ncu: {res.error}"
        return outcome
    if res.timed_out:
        outcome.status, outcome.kind = "timeout", "timeout"
        outcome.detail = f"ncu still running after {snippet.timeout * NCU_TIMEOUT_FACTOR} s: killed"
        return outcome
    if res.stdout.truncated:
        outcome.status, outcome.kind = "error", "ncu output"
        outcome.detail = "ncu's output was larger than the runner keeps: the CSV cannot be read whole"
        return outcome
    denied = next((m for m in messages if COUNTERS_RESTRICTED in m), None)
    if denied:
        # The driver keeps the GPU's counters to administrators (NVreg_RestrictProfilingToAdminUsers) and the
        # sandboxed user is not one: nothing could be measured here, which is a skip, not a verdict.
        outcome.status, outcome.kind = "skipped", "ncu could not profile"
        outcome.detail = f"not profiled: the GPU's performance counters are refused to the sandbox's user ({denied})"[:600]
        return outcome
    try:
        reading = parse_ncu_csv(res.stdout.text)
    except NcuCsvError as exc:
        # ncu could not profile here (counter permission, the sandbox or the seccomp filter refusing what it
        # needs): an infrastructure fact, reported as such with ncu's own words, never a pass.
        why = "; ".join(errors[:3]) or (messages[-1] if messages else "") or f"exit status {res.exit_code}"
        outcome.status, outcome.kind = "error", "ncu could not profile"
        outcome.detail = f"{exc}: {why}"[:600]
        return outcome
    outcome.checks = evaluate(assertions, reading)
    outcome.resources["ncu_values"] = {
        c["pattern"].split(" ")[0]: c["detail"] for c in outcome.checks if isinstance(c["pattern"], str)
    }
    failed = [c for c in outcome.checks if not c["ok"]]
    if res.exit_code not in (0, None) and not failed:
        outcome.status, outcome.kind = "error", "ncu exit status"
        outcome.detail = f"ncu exited with {res.exit_code}: " + ("; ".join(errors[:3]) or "no message")
    elif failed:
        outcome.status, outcome.kind = "fail", "ncu assertion"
        outcome.detail = "; ".join(f"{c['pattern']}: {c['detail']}" for c in failed)[:600]
    else:
        outcome.status, outcome.detail = "pass", "; ".join(str(c["detail"]) for c in outcome.checks)[:600]
    return outcome
