"""A GPU worker serves only a target the local GPU can run, and says why it refuses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from queue_fleet import REPO

from app.queue.target_check import WorkerRefused, check_target
from app.queue.worker import scrub_environment
from runner.gpus import Gpu, driver_present
from runner.toolchain import Toolchain

H200 = Gpu(0, "NVIDIA H200", "9.0", "580.82.07", "GPU-0")
B200 = Gpu(0, "NVIDIA B200", "10.0", "580.82.07", "GPU-1")
NVCC = Toolchain(nvcc="/usr/local/cuda/bin/nvcc", nvcc_version="13.0.88")


@pytest.mark.parametrize(
    "target,gpus,reason",
    [
        (
            "sm_90a",
            [B200],
            "sm_90a programs run on GPUs of compute capability 9.0; this machine has NVIDIA B200 (compute capability 10.0)",
        ),
        ("sm_100a", [H200], "compute capability 10.0; this machine has NVIDIA H200 (compute capability 9.0)"),
        ("sm_100f", [H200], "10.0 or a later minor version"),
        ("sm_9", [H200], "unknown target 'sm_9'"),
        ("sm_90a", [], "no GPU was found"),
    ],
)
def test_a_target_the_gpu_cannot_run_is_refused_with_the_reason(target: str, gpus: list[Gpu], reason: str) -> None:
    with pytest.raises(WorkerRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        check_target(target, gpus=gpus, toolchain=NVCC)


def test_a_matching_gpu_without_nvcc_is_refused_too() -> None:
    assert check_target("sm_90a", gpus=[H200], toolchain=NVCC)[0] == H200
    assert check_target("sm_100f", gpus=[B200], toolchain=NVCC)[0] == B200
    with pytest.raises(WorkerRefused, match="nvcc was not found"):
        check_target("sm_90a", gpus=[H200], toolchain=Toolchain(notes=["nvcc: not on PATH"]))


@pytest.mark.skipif(driver_present(), reason="this machine has an NVIDIA driver: the no-GPU refusal cannot be seen here")
def test_the_command_refuses_on_a_machine_without_a_gpu() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "worker", "--target", "sm_90a"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KERNELWIKI_QUEUE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
    )
    assert done.returncode == 2
    assert "refusing to start: no NVIDIA driver is loaded" in done.stderr and "compute capability 9.0" in done.stderr


def test_a_worker_asked_for_a_toolchain_that_is_not_installed_refuses_naming_it(tmp_path, monkeypatch) -> None:
    from app.queue.target_check import check_targets

    monkeypatch.setenv("KERNELWIKI_TOOLCHAINS", str(tmp_path))
    with pytest.raises(
        WorkerRefused, match=r"KERNELWIKI_TOOLCHAIN: CUDA 13\.9 is not installed .*kernelwiki toolchains install 13\.9"
    ):
        check_targets(["sm_90a"], "13.9")


def test_credentials_leave_the_environment_before_jobs_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("KERNELWIKI_RUNNER_TOKEN", "KERNELWIKI_QUEUE_DATABASE_URL", "KERNELWIKI_DB", "PGPASSWORD", "MY_API_TOKEN"):
        monkeypatch.setenv(key, "secret")
    monkeypatch.setenv("KERNELWIKI_TARGETS", '["sm_90a"]')
    scrub_environment()
    assert [k for k in os.environ if os.environ[k] == "secret"] == []
    assert os.environ["KERNELWIKI_TARGETS"] == '["sm_90a"]'


SHED = """
import os
from app.settings import Settings
from app.queue.worker import shed_secrets
s = shed_secrets(Settings())
seen = open(f"/proc/{os.getpid()}/environ", "rb").read()
print(b"sekrit" in seen, s.runner_token.get_secret_value(), s.queue_database_url.get_secret_value(), "PGPASSWORD" in os.environ)
"""


def test_credentials_leave_even_the_environment_the_kernel_shows() -> None:
    """/proc/PID/environ keeps what a process started with: the worker re-executes itself without them."""
    env = {
        **os.environ,
        "KERNELWIKI_RUNNER_TOKEN": "sekrit",
        "KERNELWIKI_QUEUE_DATABASE_URL": "postgresql://u:sekrit@h/q",
        "PGPASSWORD": "sekrit",
    }
    done = subprocess.run([sys.executable, "-c", SHED], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "sekrit", "postgresql://u:sekrit@h/q", "False"]


def test_the_worker_refuses_without_its_sandbox_and_passes_the_isolation_setting_down(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    from app.queue.job import runner_verify
    from app.queue.target_check import check_sandbox
    from runner import sandbox, settings
    from runner.settings import RunnerSettings
    from snippets import extract_snippets

    monkeypatch.setattr(settings, "_settings", [RunnerSettings(bwrap=str(tmp_path / "no-bwrap"))])
    with pytest.raises(WorkerRefused, match="apt-get install bubblewrap"):
        check_sandbox(None)
    assert check_sandbox("none") == "none"
    snippets, _ = extract_snippets("w", "w.md", "```python compile\nprint('hi')\n```\n", 1, [])
    verify = runner_verify([], Toolchain(), tmp_path / "cache", "none")
    records = verify(snippets[0].to_dict(), snippets[0].targets[0], True)
    assert [(r["step"], r["status"], r["isolation"]) for r in records] == [("compile", "syntax-ok", "none")]
    refused = runner_verify([], Toolchain(), tmp_path / "cache", None)
    with pytest.raises(sandbox.SandboxUnavailable):
        refused(snippets[0].to_dict(), snippets[0].targets[0], True)
