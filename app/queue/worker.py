"""The worker processes of the job queue: GPU workers for their targets, and the scheduler.

`kernelwiki worker --target sm_90a` consumes the `sm_90a` queue (and `any`;
`--target` repeats: an H200 node serves `sm_90` and `sm_90a`):
it verifies each snippet with the runner on this machine's matching GPU and
posts the evidence to the service (`POST /api/evidence`, runner token). It
never needs the index database. Before any job runs it re-executes itself with
the token and queue URL out of its environment (handed over through a pipe),
so snippet processes cannot see them, not even in /proc/PPID/environ; the
runner also starts them with a cleaned environment, in a sandbox where one
works. It refuses to start when no local GPU can run a target, and says why
(app/queue/target_check.py).

`kernelwiki worker --toolchains 13.0,13.1` (or `all`: every installed release) consumes
the matrix queues of those releases (`matrix-13.0`, `matrix-13.1`): compile-only, no GPU
needed, so CPU machines fan the matrix out (app/queue/matrix_job.py). With `--target` too,
a GPU worker serves both.

`kernelwiki worker --scheduler` consumes the control queue: the on-edit sweep
and the nightly fan-out (app/queue/tasks.py). It reads the index database.

Every worker also puts back stalled jobs (a worker killed mid-job) of its queues.
One job's handling is app/queue/job.py; the service's API, app/queue/client.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import sys
from typing import Any

import procrastinate

from app.queue.client import EvidenceClient
from app.queue.job import Runtime, VerifyFn, runner_verify
from app.queue.matrix_job import CompileFn, MatrixRuntime, held_toolchains, runner_compile
from app.queue.target_check import WorkerRefused, check_sandbox, check_targets
from app.queue.tasks import ANY_QUEUE, CONTROL_QUEUE, build_app, ensure_schema, matrix_queue, recover_stalled
from app.settings import Settings
from app.tryrun.work.jobs import try_queues, try_runtime_for

log = logging.getLogger("kernelwiki.worker")

SENSITIVE_ENV = (
    "KERNELWIKI_QUEUE_DATABASE_URL",
    "KERNELWIKI_DB",
    "KERNELWIKI_RUNNER_TOKEN",
    "DATABASE_URL",
    "PGPASSWORD",
    "PGPASSFILE",
)


SECRETS_FD = "KERNELWIKI_SECRETS_FD"
"""Set on the re-executed worker: the pipe its credentials arrive through."""
HANDED_OVER = {"KERNELWIKI_RUNNER_TOKEN": "runner_token", "KERNELWIKI_QUEUE_DATABASE_URL": "queue_database_url"}


def _is_secret(name: str) -> bool:
    """Whether an environment variable holds a credential: the one rule `shed_secrets` and `scrub_environment` share."""
    from runner.sandbox import SECRET_NAME

    return name in SENSITIVE_ENV or SECRET_NAME.search(name) is not None


def _secret_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if _is_secret(k)}


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
    for key in [k for k in os.environ if _is_secret(k)]:
        del os.environ[key]


async def _recovery_loop(app: procrastinate.App, settings: Settings, queues: list[str] | None) -> None:
    interval = max(1.0, settings.stalled_after_s / 4)
    while True:
        try:
            await recover_stalled(app, settings.stalled_after_s, settings.job_attempts, queues)
        except Exception as exc:  # noqa: BLE001 - the queue database may be briefly away; try again
            log.warning("stalled-job recovery failed: %s", exc)
        await asyncio.sleep(interval)


async def _serve(
    app: procrastinate.App, settings: Settings, queues: list[str], context: dict[str, Any], name: str, recover: list[str] | None
) -> None:
    async with app.open_async():
        recovery = asyncio.create_task(_recovery_loop(app, settings, recover))
        try:
            await app.run_worker_async(
                queues=queues,
                name=name,
                concurrency=1,
                additional_context=context,
                update_heartbeat_interval=settings.worker_heartbeat_s,
                stalled_worker_timeout=settings.stalled_after_s,
                delete_jobs="successful",
            )
        finally:
            recovery.cancel()


def run_gpu_worker(
    settings: Settings,
    targets: list[str] | str,
    verify: VerifyFn | None = None,
    toolchain_label: str | None = None,
    name: str | None = None,
    toolchains: list[str] | None = None,
) -> None:
    """Serve the queues of `targets` (and `any`; with `toolchains`, those releases' matrix queues too) until stopped (SIGINT/SIGTERM finish the running job first).

    `verify` and `toolchain_label` replace the runner and the GPU check (tests, benchmarks);
    `name` (default: the host name) is recorded with the evidence as `worker`.
    """
    targets = [targets] if isinstance(targets, str) else list(targets)
    settings = shed_secrets(settings)
    gpus: list[Any] | None = None  # found by check_targets; None (tests' fake verify): the runner discovers them
    toolchain: Any = None
    if verify is None:
        from runner.sandbox import WORKER_CGROUP_DEFAULT, cgroup_problem

        os.environ.setdefault("KERNELWIKI_CGROUP", WORKER_CGROUP_DEFAULT)  # before the runner reads its settings
        gpus, toolchain = check_targets(targets, settings.toolchain)
        check_sandbox(settings.isolation)
        if problem := cgroup_problem():
            raise WorkerRefused(problem)
        verify = runner_verify(gpus, toolchain, settings.worker_cache, settings.isolation)
        toolchain_label = toolchain.label
        log.info("serving %s on %s with %s", ", ".join(targets), ", ".join(g.name for g in gpus), toolchain.label)
    token = settings.runner_token.get_secret_value() if settings.runner_token else ""
    if not token:
        raise WorkerRefused("no runner token: set KERNELWIKI_RUNNER_TOKEN to the service's token")
    ensure_schema(settings)
    app = build_app(settings)
    with EvidenceClient(settings.server_url, token, settings.worker_http_timeout_s) as client:
        runtime = Runtime(targets, toolchain_label or "unknown", client, verify, name or socket.gethostname())
        if settings.toolchain and toolchain is not None:  # an installed release chosen, not the node's nvcc
            runtime.toolchain_release = toolchain.nvcc_release or settings.toolchain
        try_runtime = try_runtime_for(settings, token, gpus, toolchain)  # try runs (issue 27), after every verification job
        scrub_environment()
        queues = [*targets, ANY_QUEUE, *try_queues(targets)]
        context = {"runtime": runtime, "try_runtime": try_runtime}
        if toolchains:
            matrix = matrix_runtime_for(settings, client, toolchains, None, None)
            matrix.name = runtime.name
            context["matrix_runtime"] = matrix
            queues += [matrix_queue(r) for r in matrix.releases]
        asyncio.run(_serve(app, settings, queues, context, f"{'+'.join(targets)}@{runtime.name}", queues))


def matrix_runtime_for(
    settings: Settings,
    client: EvidenceClient,
    names: list[str],
    compile_fn: CompileFn | None,
    fingerprints: dict[str, str] | None,
) -> MatrixRuntime:
    """The matrix jobs' runtime: the held releases (`names`, checked now: a release not installed is refused)."""
    from runner.toolchains import ToolchainError, toolchains_dir

    if compile_fn is None or fingerprints is None:
        try:
            held = held_toolchains(names, toolchains_dir().resolve())
        except ToolchainError as exc:
            raise WorkerRefused(f"--toolchains: {exc}") from None
        # the toolchain stamp: its fingerprint (tools, versions, installed wheels), hashed to a fixed length
        fingerprints = {release: hashlib.sha256(tc.fingerprint.encode()).hexdigest() for release, tc in held.items()}
        compile_fn = runner_compile(held, settings.worker_cache, settings.isolation)
    return MatrixRuntime(fingerprints, client, compile_fn)


def run_matrix_worker(
    settings: Settings,
    toolchains: list[str],
    compile_fn: CompileFn | None = None,
    fingerprints: dict[str, str] | None = None,
    name: str | None = None,
) -> None:
    """Serve the matrix queues of the releases held (compile-only: no GPU) until stopped.

    `compile_fn` and `fingerprints` replace the runner and the installed releases (tests)."""
    settings = shed_secrets(settings)
    if compile_fn is None:
        check_sandbox(settings.isolation)
    token = settings.runner_token.get_secret_value() if settings.runner_token else ""
    if not token:
        raise WorkerRefused("no runner token: set KERNELWIKI_RUNNER_TOKEN to the service's token")
    ensure_schema(settings)
    app = build_app(settings)
    with EvidenceClient(settings.server_url, token, settings.worker_http_timeout_s) as client:
        runtime = matrix_runtime_for(settings, client, toolchains, compile_fn, fingerprints)
        runtime.name = name or socket.gethostname()
        scrub_environment()
        queues = [matrix_queue(r) for r in runtime.releases]
        log.info("serving the matrix of CUDA %s", ", ".join(runtime.releases))
        asyncio.run(_serve(app, settings, queues, {"matrix_runtime": runtime}, f"matrix@{runtime.name}", queues))


def run_scheduler(settings: Settings) -> None:
    """Serve the control queue: on-edit sweep, nightly fan-out; recover stalled jobs of every queue."""
    from app.queue.scheduler import Scheduler
    from app.store import Store

    store = Store(settings.db)
    store.create_schema()
    ensure_schema(settings)
    app = build_app(settings)
    scheduler = Scheduler(app, store, settings)
    asyncio.run(_serve(app, settings, [CONTROL_QUEUE], {"scheduler": scheduler}, f"scheduler@{socket.gethostname()}", None))
