"""Workers of the job queue: GPU workers for their targets, and the scheduler.

`kernelwiki worker --target sm_90a` consumes the `sm_90a` queue (and `any`;
`--target` repeats: an H200 node serves `sm_90` and `sm_90a`):
it verifies each snippet with the runner on this machine's matching GPU and
posts the evidence to the service (`POST /api/evidence`, runner token). It
never needs the index database. Before any job runs it re-executes itself with
the token and queue URL out of its environment (handed over through a pipe),
so snippet processes cannot see them, not even in /proc/PPID/environ; the
runner also starts them with a cleaned environment, in a sandbox where one
works. It refuses to start when no local GPU can run a target, and says why.

`kernelwiki worker --scheduler` consumes the control queue: the on-edit sweep
and the nightly fan-out (app/queue.py). It reads the index database.

Every worker also puts back stalled jobs (a worker killed mid-job) of its queues.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import procrastinate

from app.queue import ANY_QUEUE, CONTROL_QUEUE, NOT_VERIFIED, build_app, ensure_schema, recover_stalled
from app.settings import Settings

log = logging.getLogger("kernelwiki.worker")

VerifyFn = Callable[[dict[str, Any], str, bool], list[dict[str, Any]]]
"""verify(snippet as Snippet.to_dict(), target, force) → evidence records as dicts."""

SENSITIVE_ENV = ("KERNELWIKI_QUEUE_DATABASE_URL", "KERNELWIKI_DB", "KERNELWIKI_RUNNER_TOKEN", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE")


class WorkerRefused(Exception):
    """This machine cannot serve the requested target; the message says why."""


# -- can this machine run the target? -------------------------------------------


def check_target(target: str, gpus: list[Any] | None = None, toolchain: Any | None = None) -> tuple[Any, Any]:
    """The local GPU and toolchain that serve `target`, or WorkerRefused saying why not."""
    from runner.gpus import compute_capability_of, discover_gpus, driver_present, pick_gpu
    from runner.toolchain import discover_toolchain

    want = compute_capability_of(target)
    if want is None:
        raise WorkerRefused(f"unknown target '{target}': expected a form like sm_90a, sm_100a or sm_100f")
    if gpus is None:
        if not driver_present():
            raise WorkerRefused(
                f"no NVIDIA driver is loaded on this machine (/proc/driver/nvidia/version and /dev/nvidiactl are missing): "
                f"{target} needs a GPU of compute capability {want[0]}.{want[1]}"
            )
        gpus = discover_gpus()
    if not gpus:
        raise WorkerRefused(f"the NVIDIA driver answered but no GPU was found (CuPy, nvidia-smi): {target} needs one")
    gpu = pick_gpu(gpus, target)
    if gpu is None:
        have = ", ".join(f"{g.name} (compute capability {g.compute_capability})" for g in gpus)
        need = f"{want[0]}.{want[1]}" + (" or a later minor version" if want[2] else "")
        raise WorkerRefused(f"{target} programs run on GPUs of compute capability {need}; this machine has {have}")
    toolchain = toolchain or discover_toolchain()
    if not toolchain.nvcc:
        raise WorkerRefused(f"nvcc was not found ({'; '.join(toolchain.notes) or 'not on PATH'}): {target} snippets cannot be built")
    return gpu, toolchain


def check_targets(targets: list[str]) -> tuple[list[Any], Any]:
    """The local GPUs that serve all of `targets` (GPU discovery and toolchain once), or WorkerRefused."""
    from runner.gpus import discover_gpus, driver_present
    from runner.toolchain import discover_toolchain

    if not targets:
        raise WorkerRefused("give the target(s) to serve, e.g. --target sm_90a")
    gpus = discover_gpus() if driver_present() else None
    toolchain = discover_toolchain()
    chosen: list[Any] = []
    for target in targets:
        gpu, _ = check_target(target, gpus, toolchain)
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen, toolchain


def check_sandbox(isolation: str | None) -> str:
    """The isolation jobs will run under; WorkerRefused when it cannot be used here (nothing runs unsandboxed)."""
    from runner.sandbox import SandboxUnavailable, detect_isolation

    try:
        return detect_isolation(isolation)
    except (SandboxUnavailable, ValueError) as exc:
        raise WorkerRefused(str(exc)) from None


def runner_verify(gpus: list[Any], toolchain: Any, cache_dir: Path, isolation: str | None = None) -> VerifyFn:
    """Verification by the runner (runner/verify.py) on `gpus` with `toolchain`, sandboxed as `isolation` says."""

    def verify(snippet: dict[str, Any], target: str, force: bool) -> list[dict[str, Any]]:
        from runner.verify import verify as run
        from snippets.snippet import Snippet

        report = run(
            ".", targets=[target], snippets=[Snippet.from_dict(snippet)], jobs=1, use_cache=not force,
            cache_dir=cache_dir, toolchain=toolchain, gpus=gpus, isolation=isolation,
        )  # fmt: skip
        return [r.to_dict() for r in report.records]

    return verify


# -- talking to the service ----------------------------------------------------------


class ServiceError(Exception):
    """The service did not accept a request (the job is retried)."""


class EvidenceClient:
    """The service's evidence API as a worker uses it (standard library HTTP, every call with a timeout)."""

    def __init__(self, base_url: str, token: str, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s

    def _request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()[:500].decode(errors="replace")
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise ServiceError(f"{method} {self.base_url}{path}: {exc}") from exc

    def history(self, snippet_id: str) -> list[dict[str, Any]] | None:
        """Every evidence record of a snippet (None: the index has no such snippet)."""
        status, body = self._request("GET", f"/api/snippets/{urllib.parse.quote(snippet_id, safe='')}/evidence")
        if status == 404:
            return None
        if status != 200:
            raise ServiceError(f"evidence history of {snippet_id}: HTTP {status}: {body}")
        return body

    def post(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        status, body = self._request("POST", "/api/evidence", records)
        if status != 200:
            raise ServiceError(f"POST /api/evidence: HTTP {status}: {body}")
        return body


# -- one job ---------------------------------------------------------------------------


def _when(stamp: str) -> datetime:
    try:
        value = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def job_record_id(record: dict[str, Any], job_id: int) -> str:
    """A record id fixed by the job: a retried or twice-delivered job writes the same records once."""
    from runner.evidence import compute_record_id

    return compute_record_id(
        record["snippet_id"], record["target"], record["step"], record["content_hash"], record["toolchain"], f"job:{job_id}"
    )


@dataclass
class Runtime:
    """What a GPU worker's verification jobs run with."""

    targets: list[str]  # the queues served (besides `any`)
    toolchain: str  # label recorded in evidence, e.g. "nvcc 13.0.88"
    client: EvidenceClient
    verify: VerifyFn
    name: str = socket.gethostname()

    def handle(self, job_id: int, attempts: int, job: dict[str, Any]) -> str:
        """Verify one snippet × target unless that is done already; post the evidence."""
        sid, target, content_hash = job["snippet_id"], job["target"], job["content_hash"]
        force = bool(job.get("force"))
        if not force and self.toolchain in job.get("verified", []):
            return f"skipped {sid}@{target}: verified with {self.toolchain} already"
        history = self.client.history(sid)
        if history is None:
            return f"skipped {sid}@{target}: no longer in the index"
        ours = [r for r in history if r["target"] == target and r["data"].get("content_hash") == content_hash]
        if any(r["stale"] for r in ours):
            return f"skipped {sid}@{target}: its content changed after this job was queued"
        if any(r["data"].get("job_id") == job_id for r in ours):
            return f"done {sid}@{target}: this job's evidence was recorded before it was retried"
        same = [r for r in ours if r["data"].get("toolchain") == self.toolchain and r["status"] not in NOT_VERIFIED]
        if same and (not force or any(_when(r["timestamp"]) >= _when(job.get("queued_at", "")) for r in same)):
            return f"skipped {sid}@{target}: verified with {self.toolchain} already"
        records = self.verify(job["snippet"], target, force)
        if not records:
            raise RuntimeError(f"the runner produced no evidence for {sid}@{target}")
        for record in records:
            record["job_id"] = job_id
            record["worker"] = self.name
            record["record_id"] = job_record_id(record, job_id)
        result = self.client.post(records)
        statuses = ",".join(f"{r['step']}={r['status']}" for r in records)
        return f"{sid}@{target}: {statuses} ({result.get('inserted', 0)} new, {result.get('duplicates', 0)} already recorded)"


# -- running a worker ---------------------------------------------------------------------


SECRETS_FD = "KERNELWIKI_SECRETS_FD"
"""Set on the re-executed worker: the pipe its credentials arrive through."""
HANDED_OVER = {"KERNELWIKI_RUNNER_TOKEN": "runner_token", "KERNELWIKI_QUEUE_DATABASE_URL": "queue_database_url"}


def _secret_env() -> dict[str, str]:
    from runner.sandbox import SECRET_NAME

    return {k: v for k, v in os.environ.items() if k in SENSITIVE_ENV or SECRET_NAME.search(k)}


def shed_secrets(settings: Settings) -> Settings:
    """Leave no credentials in this process's environment, not even in /proc/self/environ.

    Deleting variables does not change what /proc/PID/environ shows, and a
    snippet run without a PID namespace could read its worker's. So the first
    call re-executes this same command without them and hands the runner token
    and queue URL over through a pipe (it does not return); the call in the new
    process reads them back into the settings. Other credentials are dropped
    (a queue password belongs in the URL, not in PGPASSWORD).
    """
    from pydantic import SecretStr

    fd = os.environ.pop(SECRETS_FD, None)
    if fd is not None:
        with os.fdopen(int(fd), "rb") as pipe:
            handed = json.loads(pipe.read() or b"{}")
        update = {field: SecretStr(handed[var]) for var, field in HANDED_OVER.items() if handed.get(var)}
        return settings.model_copy(update=update)
    secret = _secret_env()
    if not secret:
        return settings
    payload = json.dumps({k: v for k, v in secret.items() if k in HANDED_OVER}).encode()
    if len(payload) > 60_000:  # a pipe holds 64 kB until it is read
        raise WorkerRefused("the runner token and queue URL are too long to hand over")
    read_end, write_end = os.pipe()
    os.write(write_end, payload)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k not in secret}
    env[SECRETS_FD] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    raise AssertionError("unreachable")  # pragma: no cover


def scrub_environment() -> None:
    """Remove credentials from this process's environment before any job starts a process."""
    from runner.sandbox import SECRET_NAME

    for key in list(os.environ):
        if key in SENSITIVE_ENV or SECRET_NAME.search(key):
            del os.environ[key]


async def _recovery_loop(app: procrastinate.App, settings: Settings, queues: list[str] | None) -> None:
    interval = max(1.0, settings.stalled_after_s / 4)
    while True:
        try:
            await recover_stalled(app, settings.stalled_after_s, settings.job_attempts, queues)
        except Exception as exc:  # noqa: BLE001 - the queue database may be briefly away; try again
            log.warning("stalled-job recovery failed: %s", exc)
        await asyncio.sleep(interval)


async def _serve(app: procrastinate.App, settings: Settings, queues: list[str], context: dict[str, Any], name: str, recover: list[str] | None) -> None:
    async with app.open_async():
        recovery = asyncio.create_task(_recovery_loop(app, settings, recover))
        try:
            await app.run_worker_async(
                queues=queues, name=name, concurrency=1, additional_context=context,
                update_heartbeat_interval=settings.worker_heartbeat_s,
                stalled_worker_timeout=settings.stalled_after_s, delete_jobs="successful",
            )  # fmt: skip
        finally:
            recovery.cancel()


def run_gpu_worker(
    settings: Settings, targets: list[str] | str, verify: VerifyFn | None = None, toolchain_label: str | None = None, name: str | None = None
) -> None:
    """Serve the queues of `targets` (and `any`) until stopped (SIGINT/SIGTERM finish the running job first).

    `verify` and `toolchain_label` replace the runner and the GPU check (tests, benchmarks);
    `name` (default: the host name) is recorded with the evidence as `worker`.
    """
    targets = [targets] if isinstance(targets, str) else list(targets)
    settings = shed_secrets(settings)
    if verify is None:
        gpus, toolchain = check_targets(targets)
        check_sandbox(settings.isolation)
        verify = runner_verify(gpus, toolchain, settings.worker_cache, settings.isolation)
        toolchain_label = toolchain.label
        log.info("serving %s on %s with %s", ", ".join(targets), ", ".join(g.name for g in gpus), toolchain.label)
    token = settings.runner_token.get_secret_value() if settings.runner_token else ""
    if not token:
        raise WorkerRefused("no runner token: set KERNELWIKI_RUNNER_TOKEN to the service's token")
    ensure_schema(settings)
    app = build_app(settings)
    client = EvidenceClient(settings.server_url, token, settings.worker_http_timeout_s)
    runtime = Runtime(targets, toolchain_label or "unknown", client, verify, name or socket.gethostname())
    scrub_environment()
    queues = [*targets, ANY_QUEUE]
    asyncio.run(_serve(app, settings, queues, {"runtime": runtime}, f"{'+'.join(targets)}@{runtime.name}", queues))


def run_scheduler(settings: Settings) -> None:
    """Serve the control queue: on-edit sweep, nightly fan-out; recover stalled jobs of every queue."""
    from app.queue import Scheduler
    from app.store import Store

    store = Store(settings.db)
    store.create_schema()
    ensure_schema(settings)
    app = build_app(settings)
    scheduler = Scheduler(app, store, settings)
    asyncio.run(_serve(app, settings, [CONTROL_QUEUE], {"scheduler": scheduler}, f"scheduler@{socket.gethostname()}", None))
