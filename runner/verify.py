"""Verifying a wiki: every snippet × target compiled, checked and (for programs) run, as evidence.

`verify()` is what both `python3 -m runner verify` and the service's
`kernelwiki verify` call. Work is spread over `jobs` threads (each compile and
run is its own sandboxed process); runs on one GPU are serialized so that one
program never competes with another for the device. Identical work (the same
content hash, target and toolchain) is done once per call and, with the cache,
once ever.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.artifacts import ArtifactStore, keep_artifacts
from runner.batch import TargetBatch, batchable
from runner.cache import DEFAULT_CACHE_DIR, ResultCache, cache_key
from runner.compile import build_snippet, sass_step
from runner.cute_dsl import judge as judge_dsl, sandbox_check as cute_sandbox_check
from runner.evidence import EvidenceRecord, write_jsonl
from runner.execute import run_step
from runner.gpus import Gpu, discover_gpus_cached, pick_gpu
from runner.ncu import find_ncu, ncu_step
from runner.nvrtc import build_nvrtc
from runner.outcome import StepOutcome, to_record
from runner.sandbox import detect_isolation
from runner.status import FAILING, SYNTAX_OK, honest_python, worst
from runner.toolchain import Toolchain, discover_toolchain
from snippets.architectures import ANY_TARGET, normalize_architecture, target_of
from snippets.attributes import InfoStringError, check_snippet_rules
from snippets.classify import FRAGMENT_REASON
from snippets.diagnostic import Diagnostic
from snippets.extract import content_hash, extract_snippets
from snippets.page import PageIds, iter_page_files, load_page
from snippets.snippet import Snippet

RUNNER_VERSION = "kernelwiki-runner-3"  # 3: seccomp, readback through the sandbox, tamper check, RE2
"""Part of every cache key: bump when the way results are judged changes."""

SUMMARY_COLUMNS = ("passed", "failed", "errors", "skipped", "unverified", "syntax ok", "xfail")
_COLUMN_OF = {
    "pass": "passed",
    "fail": "failed",
    "timeout": "failed",
    "error": "errors",
    "skipped": "skipped",
    "unverified": "unverified",
    "syntax-ok": "syntax ok",
    "xfail": "xfail",
}

ProgressCallback = Callable[[int, int, str, str, str], None]
"""progress(done, total, snippet_id, target, status) after each snippet × target."""

StepCallback = Callable[[str, str, str], None]
"""on_step(snippet_id, target, step) as a step starts: "compile" before the build, "run" before the program runs
(a result taken from the cache starts no step)."""


@dataclass
class VerifyReport:
    """Everything one verification produced."""

    records: list[EvidenceRecord] = field(default_factory=list)  # one per snippet × target × step
    problems: list[Diagnostic] = field(default_factory=list)  # page and snippet problems (errors and warnings)
    snippets: list[Snippet] = field(default_factory=list)  # every snippet seen, in page order
    summary: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # page -> target -> column -> count
    totals: dict[str, int] = field(default_factory=dict)  # column -> count over everything
    toolchain: dict[str, Any] = field(default_factory=dict)  # discovered tools and versions
    gpus: list[dict[str, Any]] = field(default_factory=list)  # GPUs seen (when a program needed one)
    isolation: str | None = None  # isolation in force for the processes started (None: none started)
    duration_s: float = 0.0  # wall-clock seconds of the whole verification
    cache_hits: int = 0  # snippet × target results taken from the cache
    builds: int = 0  # snippet × target results computed now

    @property
    def exit_code(self) -> int:
        """1 when something failed that was not expected to (a fail, timeout or error record, or a page
        or block problem of severity error, whose snippets could not be verified), else 0."""
        bad = any(r.status in FAILING for r in self.records)
        bad = bad or any(p.severity == "error" for p in self.problems)
        return 1 if bad else 0

    def write_jsonl(self, path: Path | str) -> int:
        """Write the records as evidence JSONL."""
        return write_jsonl(path, self.records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": [r.to_dict() for r in self.records],
            "problems": [p.to_dict() for p in self.problems],
            "summary": self.summary,
            "totals": self.totals,
            "toolchain": self.toolchain,
            "gpus": self.gpus,
            "isolation": self.isolation,
            "duration_s": self.duration_s,
            "cache_hits": self.cache_hits,
            "builds": self.builds,
            "exit_code": self.exit_code,
        }


def combined_status(statuses: list[str]) -> str:
    """The worst of a snippet × target's step statuses (order: runner/status.py)."""
    return worst(statuses, default="pass")


def summarize(records: list[EvidenceRecord]) -> tuple[dict[str, dict[str, dict[str, int]]], dict[str, int]]:
    """Per page and target, how many snippets passed, failed, … (worst step of each snippet × target)."""
    steps: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        steps.setdefault((r.page_id, r.target, r.snippet_id), []).append(r.status)
    summary: dict[str, dict[str, dict[str, int]]] = {}
    totals: Counter[str] = Counter({c: 0 for c in SUMMARY_COLUMNS})
    for (page, target, _), statuses in steps.items():
        column = _COLUMN_OF[combined_status(statuses)]
        cell = summary.setdefault(page, {}).setdefault(target, {c: 0 for c in SUMMARY_COLUMNS})
        cell[column] += 1
        totals[column] += 1
    return summary, dict(totals)


def normalize_target(value: str) -> str:
    """`sm90a`, `SM_90A`, `sm_90a` → `sm_90a` (and `any` stays `any`)."""
    return ANY_TARGET if value.strip().lower() == ANY_TARGET else target_of(normalize_architecture(value))


def load_snippets(pages_root: Path | str, pages: list[str] | None = None) -> tuple[list[Snippet], list[Diagnostic]]:
    """Read every page under `pages_root` (or only the ids in `pages`) and extract its snippets."""
    root = Path(pages_root)
    snippets: list[Snippet] = []
    problems: list[Diagnostic] = []
    ids = PageIds()
    wanted = set(pages) if pages else None
    for path in iter_page_files(root):
        page, diagnostics = load_page(path, root)
        if wanted is None or (page is not None and page.id in wanted):
            problems.extend(diagnostics)
        if page is None or (wanted is not None and page.id not in wanted):
            continue
        duplicate = ids.claim(page)
        if duplicate is not None:
            problems.append(duplicate)
            continue
        found, found_problems = extract_snippets(page.id, page.path, page.body, page.body_line, list(page.architectures))
        snippets.extend(found)
        problems.extend(found_problems)
    for missing in sorted((wanted or set()) - set(ids.owners)):
        problems.append(Diagnostic(str(root), 1, "error", f"no valid page with id '{missing}'"))
    return snippets, problems


def rechecked(snippet: Snippet) -> Snippet:
    """`snippet` as the runner will build it: its flags and checks checked again against the grammar's rules
    (snippets.attributes.check_snippet_rules) and its content hash recomputed, whatever it came from (a page, a
    queue job, a caller). A snippet that breaks a rule becomes an invalid block (mode `error`): nothing of it
    reaches a compiler, a shell or the regex engine."""
    if not snippet.verifiable:
        return snippet
    try:
        check_snippet_rules(snippet.flags, snippet.checks)
    except InfoStringError as exc:
        refused = replace(snippet, mode="error", error=f"refused by the runner: {exc}")
        return replace(refused, content_hash=content_hash(refused))
    fresh = content_hash(snippet)
    return snippet if fresh == snippet.content_hash else replace(snippet, content_hash=fresh)


class _Context:
    """Shared state of one verification: tools, GPUs, cache, per-GPU locks, in-run memo."""

    def __init__(
        self,
        toolchain: Toolchain,
        cache: ResultCache | None,
        compile_only: bool,
        gpus: list[Gpu] | None,
        cache_dir: Path,
        isolation: str | None,
    ) -> None:
        self.toolchain = toolchain
        self.cache = cache
        self.compile_only = compile_only
        self.cache_dir = cache_dir
        self.isolation = isolation
        self._gpus = gpus
        self._lock = threading.Lock()
        self._gpu_locks: dict[int, threading.Lock] = {}
        self._memo: dict[str, list[StepOutcome]] = {}
        self._memo_locks: dict[str, threading.Lock] = {}
        self.hits = 0
        self.builds = 0
        self.started_processes = False
        self.batches: dict[int, TargetBatch] = {}  # id(snippet) → its targets' shared nvcc runs (compile-only)
        self.artifacts: ArtifactStore | None = None  # where SASS and PTX are kept (None: not kept)
        self.on_step: StepCallback | None = None  # told as each compile and run starts (try runs stream it)

    def gpus(self) -> list[Gpu]:
        with self._lock:
            if self._gpus is None:
                self._gpus = discover_gpus_cached(self.cache_dir)
            return self._gpus

    def gpu_lock(self, gpu: Gpu) -> threading.Lock:
        with self._lock:
            return self._gpu_locks.setdefault(gpu.index, threading.Lock())

    def key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._memo_locks.setdefault(key, threading.Lock())


def _fixed_outcome(snippet: Snippet) -> list[StepOutcome] | None:
    """Outcomes that need no tool: invalid blocks and sketches."""
    if snippet.mode == "error":
        return [
            StepOutcome(
                step="compile", status="error", kind="invalid block", detail=snippet.error or "invalid block", isolation="none"
            )
        ]
    if snippet.mode in ("sketch", "fragment"):
        return [
            StepOutcome(
                step="compile",
                status="unverified",
                kind=snippet.mode,
                detail=FRAGMENT_REASON if snippet.mode == "fragment" else "sketch: shown as written, never compiled",
                isolation="none",
            )
        ]
    return None


def _work(snippet: Snippet, target: str, ctx: _Context) -> list[StepOutcome]:
    """Build, check and run one snippet for one target, with Python syntax checks reported as `syntax-ok`, never `pass`."""
    outcomes = _work_raw(snippet, target, ctx)
    if snippet.lang != "python" or snippet.mode != "compile":
        return outcomes
    outcomes = [replace(o, status=honest_python(snippet.lang, snippet.mode, o.step, o.status)) for o in outcomes]
    if any(o.step == "compile" and o.status == SYNTAX_OK for o in outcomes):
        verdict = judge_dsl(snippet.full_source, ctx.toolchain.python)  # CuTe-DSL names against the installed DSL
        if verdict is not None and verdict[0] == SYNTAX_OK:  # names resolve: construction and kw_compile() in the sandbox
            verdict = cute_sandbox_check(snippet.full_source, ctx.toolchain.python, target, ctx.isolation)
        if verdict is not None:
            outcomes = [replace(o, status=verdict[0], detail=verdict[1]) if o.step == "compile" else o for o in outcomes]
    return outcomes


def _work_raw(snippet: Snippet, target: str, ctx: _Context) -> list[StepOutcome]:
    """Build, check and run one snippet for one target (or take the result from the cache)."""
    fixed = _fixed_outcome(snippet)
    if fixed is not None:
        key = cache_key(RUNNER_VERSION, snippet.content_hash, "fixed")
        with ctx.key_lock(key):
            if key not in ctx._memo:
                cached = ctx.cache.get(key) if ctx.cache else None
                if cached is None and ctx.cache is not None:
                    ctx.cache.put(key, fixed, {"snippet": snippet.id}, deterministic=True)
                ctx._memo[key] = cached or fixed
            return ctx._memo[key]
    wants_run = snippet.mode == "run"
    gpu = pick_gpu(ctx.gpus(), target) if wants_run and not ctx.compile_only else None
    host_only = snippet.lang in ("cpp", "python") and not wants_run
    sass_checked = bool(snippet.checks.get("sass") or snippet.checks.get("no_sass"))
    key = cache_key(
        RUNNER_VERSION,
        snippet.content_hash,
        "host" if host_only else target,
        ctx.toolchain.fingerprint,
        ctx.compile_only,
        [gpu.name, gpu.compute_capability, gpu.driver_version] if gpu else None,
        bool(ctx.toolchain.sass_tool) if sass_checked else None,
        find_ncu() if snippet.checks.get("ncu") and wants_run else None,
        *(["artifacts", ctx.toolchain.nvdisasm] if ctx.artifacts is not None else []),
    )
    with ctx.key_lock(key):
        if key in ctx._memo:
            return ctx._memo[key]
        cached = ctx.cache.get(key) if ctx.cache else None
        if cached is not None and not _artifacts_present(cached, ctx.artifacts):
            cached = None
        if cached is not None:
            with ctx._lock:
                ctx.hits += 1
            ctx._memo[key] = cached
            return cached
        outcomes = _compute(snippet, target, gpu, wants_run, ctx)
        with ctx._lock:
            ctx.builds += 1
            ctx.started_processes = True
        if ctx.cache is not None:
            ctx.cache.put(key, outcomes, {"snippet": snippet.id, "target": target, "toolchain": ctx.toolchain.label})
        ctx._memo[key] = outcomes
        return outcomes


def _compute(snippet: Snippet, target: str, gpu: Gpu | None, wants_run: bool, ctx: _Context) -> list[StepOutcome]:
    build_target = target if target != ANY_TARGET else "sm_90"
    batch = ctx.batches.get(id(snippet))
    if ctx.on_step is not None:
        ctx.on_step(snippet.id, target, "compile")
    if ctx.toolchain.nvrtc and not ctx.toolchain.nvcc and snippet.lang in ("cuda", "cpp"):  # 12.x wheels: device code only
        build = build_nvrtc(snippet, build_target, ctx.toolchain, want_program=wants_run, isolation=ctx.isolation)
    else:
        build = build_snippet(snippet, build_target, ctx.toolchain, want_program=wants_run, isolation=ctx.isolation, batch=batch)
    try:
        outcomes = [build.outcome]
        if ctx.artifacts is not None and build.outcome.status == "pass":
            binary = build.device_binary
            build.outcome.artifacts = keep_artifacts(
                ctx.artifacts,
                snippet.id,
                str(binary.relative_to(build.workdir)) if binary is not None and binary.is_relative_to(build.workdir) else None,
                build.ptx,
                build.workdir,
                ctx.toolchain.nvdisasm,
                ctx.toolchain.cuobjdump,
                ctx.isolation,
            )
        if snippet.checks.get("sass") or snippet.checks.get("no_sass"):
            outcomes.append(sass_step(build, snippet, build_target, ctx.toolchain, ctx.isolation))
        if wants_run:
            if ctx.compile_only:
                outcomes.append(StepOutcome(step="run", status="skipped", detail="not run: --compile-only", isolation="none"))
            elif gpu is None:
                outcomes.append(run_step(build, snippet, target, None, ctx.toolchain, ctx.isolation))
            else:
                with ctx.gpu_lock(gpu):
                    if ctx.on_step is not None and build.outcome.status == "pass":
                        ctx.on_step(snippet.id, target, "run")
                    outcomes.append(run_step(build, snippet, target, gpu, ctx.toolchain, ctx.isolation))
                    if snippet.checks.get("ncu") and outcomes[-1].status == "pass":
                        outcomes.append(ncu_step(build, snippet, gpu, ctx.toolchain, ctx.isolation))
            if snippet.checks.get("ncu") and outcomes[-1].step == "run" and outcomes[-1].status != "pass":
                why = f"not profiled: the run step is {outcomes[-1].status}"
                if gpu is None and not ctx.compile_only:
                    why = ncu_step(build, snippet, None, ctx.toolchain, ctx.isolation).detail
                outcomes.append(StepOutcome(step="ncu", status="skipped", detail=why))
        return outcomes
    finally:
        build.cleanup()


def _artifacts_present(outcomes: list[StepOutcome], store: ArtifactStore | None) -> bool:
    """A cached result serves a run that keeps artifacts only when the ones it names are still in the store."""
    if store is None:
        return True
    return all(store.path(v).exists() for o in outcomes for k, v in o.artifacts.items() if k in ("sass", "ptx"))


def verify(
    pages_root: Path | str,
    pages: list[str] | None = None,
    targets: list[str] | None = None,
    jobs: int = 2,
    use_cache: bool = True,
    compile_only: bool = False,
    progress: ProgressCallback | None = None,
    *,
    cache_dir: Path | str | None = None,
    nvcc: str | None = None,
    toolchain: Toolchain | None = None,
    gpus: list[Gpu] | None = None,
    isolation: str | None = None,
    snippets: list[Snippet] | None = None,
    artifacts: ArtifactStore | None = None,
    on_step: StepCallback | None = None,
) -> VerifyReport:
    """Verify the snippets of the wiki at `pages_root` and return the evidence.

    pages: page ids to verify (default all); targets: e.g. ["sm_90a"] (default
    every target a snippet declares); use_cache=False re-verifies everything
    (results are still written to the cache); compile_only builds programs but
    does not run them. `gpus`, `toolchain` and `snippets` override discovery
    (tests, remote runners). `artifacts` keeps each clean build's normalised SASS and PTX
    there (runner/artifacts.py). `on_step` is told as each compile and run starts. `isolation` (bwrap, unshare-net, none, auto; default
    the KERNELWIKI_ISOLATION setting, bwrap) must work here, else
    runner.sandbox.SandboxUnavailable is raised before anything runs. Never
    raises for a snippet's failure: failures are records.
    """
    started = time.monotonic()
    report = VerifyReport()
    if snippets is None:
        snippets, problems = load_snippets(pages_root, pages)
        report.problems.extend(problems)
    snippets = [rechecked(s) for s in snippets]
    report.snippets = list(snippets)
    level = detect_isolation(isolation)  # SandboxUnavailable when it cannot be used: nothing runs unsandboxed
    tc = toolchain or discover_toolchain(nvcc)
    report.toolchain = tc.to_dict()
    cache_root = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
    ctx = _Context(
        tc, ResultCache(cache_root) if use_cache else _WriteOnlyCache(cache_root), compile_only, gpus, cache_root, level
    )
    ctx.artifacts = artifacts
    ctx.on_step = on_step
    wanted = {normalize_target(t) for t in targets} if targets else None
    work = [(s, t) for s in snippets for t in (s.targets or [""]) if wanted is None or t in wanted]
    total = len(work)
    results: dict[int, list[EvidenceRecord]] = {}
    done = 0
    order = _batch_and_order(work, ctx)
    with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
        futures = {pool.submit(_work, work[i][0], work[i][1], ctx): i for i in order}
        for future in as_completed(futures):
            i = futures[future]
            snippet, target = work[i]
            try:
                outcomes = future.result()
            except Exception as exc:  # noqa: BLE001 - an infrastructure fault becomes an error record, not a crash
                outcomes = [
                    StepOutcome(step="compile", status="error", kind="runner fault", detail=f"{type(exc).__name__}: {exc}")
                ]
            results[i] = [to_record(snippet, target, o, tc.label) for o in outcomes]
            done += 1
            if progress is not None:
                progress(done, total, snippet.id, target, combined_status([r.status for r in results[i]]))
    for batch in ctx.batches.values():
        batch.cleanup()
    report.records = [r for i in range(total) for r in results[i]]
    report.summary, report.totals = summarize(report.records)
    report.cache_hits, report.builds = ctx.hits, ctx.builds
    if ctx._gpus is not None:
        report.gpus = [g.to_dict() for g in ctx._gpus]
    report.isolation = level if ctx.started_processes else None
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _batch_and_order(work: list[tuple[Snippet, str]], ctx: _Context) -> list[int]:
    """Share nvcc runs among a snippet's targets (compile-only: nothing runs) and order the work so that
    the first target of every snippet comes before any second one: each shared run is then made by
    one worker while the others build other snippets, instead of waiting for it."""
    targets: dict[int, list[str]] = {}
    for snippet, target in work:
        targets.setdefault(id(snippet), []).append(target)
    if ctx.compile_only:
        for snippet, _ in work:
            wanted = targets[id(snippet)]
            if id(snippet) not in ctx.batches and ANY_TARGET not in wanted and "" not in wanted and batchable(snippet, wanted):
                ctx.batches[id(snippet)] = TargetBatch(snippet, wanted, ctx.toolchain, programs=True, isolation=ctx.isolation)
    seen: Counter[int] = Counter()
    rank = []
    for i, (snippet, _) in enumerate(work):
        rank.append((seen[id(snippet)], i))
        seen[id(snippet)] += 1
    return [i for _, i in sorted(rank)]


class _WriteOnlyCache(ResultCache):
    """--no-cache: never read old results, but keep the fresh ones for the next run."""

    def get(self, key: str) -> list[StepOutcome] | None:  # noqa: D102
        return None
