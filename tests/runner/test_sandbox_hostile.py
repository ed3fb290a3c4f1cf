"""Hostile snippets against the real sandbox (bubblewrap): each attack from issue 10, and what must hold.

Host-only versions run everywhere bwrap works (CI installs it; there a missing bwrap fails
test_runner_sandbox.py::test_bubblewrap_is_usable). The GPU versions (marked `gpu`) build a CUDA program
that attacks after initializing the driver, and run on an H100/H200 (docs/sandbox.md lists the results).

Where the attack needs the secrets in the *runner's own* process environment (what /proc/<pid>/environ
shows is the environment a process started with, not os.environ after a monkeypatch), the runner is
started as a child process with them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

import runner.settings
from runner.cgroup import cgroup_parent
from runner.evidence import read_jsonl
from runner.sandbox import (
    ISOLATION_BWRAP,
    ISOLATION_NONE,
    GiB,
    Limits,
    MiB,
    isolation_problem,
    resource_limit_hit,
    run_limits,
    run_process,
    runner_settings,
)
from runner.settings import CGROUP_REQUIRE, RunnerSettings
from runner.toolchain import Toolchain
from tests.ci import missing_cgroup, missing_gpu, missing_tool, require_cupy
from tests.runner.processes import gone, live_with

ROOT = Path(__file__).resolve().parents[2]

SECRETS = {
    "GITHUB_PAT": "ghp_kw10secretPAT",
    "AWS_SESSION_KEY": "kw10-aws-session-secret",
    "DB_PASS": "kw10-db-pass-secret",
    "OPENAI_KEY": "sk-kw10-openai-secret",
    "SENTRY_DSN": "https://kw10dsnsecret@sentry.example/1",
    "PGPASS": "kw10-pgpass-secret",
    "KERNELWIKI_RUNNER_TOKEN": "kw10-runner-token-secret",
}


@pytest.fixture(autouse=True, scope="module")
def _needs_bwrap() -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        missing_tool(f"bubblewrap unusable here: {problem}")


def _bwrap(argv: list[str], workdir: Path, timeout: float = 30, **kw: object):  # noqa: ANN202
    res = run_process(argv, workdir, timeout, isolation=ISOLATION_BWRAP, **kw)  # type: ignore[arg-type]
    assert res.isolation == ISOLATION_BWRAP and res.error is None, res.error
    return res


def _runner_child(code: str, cwd: Path, env_extra: dict[str, str]) -> dict:
    """Run `code` (which prints one JSON line) in a fresh Python whose *initial* environment holds `env_extra`."""
    env = {**os.environ, **env_extra, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the file system ---------------------------------------------------------------------------------------


def test_writing_outside_the_snippet_folder_reaches_nothing_on_the_host(tmp_path: Path) -> None:
    escape = Path("/tmp/kw_runner_escape")
    if escape.exists():
        pytest.skip("/tmp/kw_runner_escape exists already on this host (left by an unsandboxed run?)")
    work = tmp_path / "work"
    work.mkdir()
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text("kw10-host-file-secret\n")
    script = (
        f"echo pwned > /tmp/kw_runner_escape; echo pwned > {host_file}; echo pwned > {ROOT}/kw_escape; "
        f"cat {host_file} /etc/hostname /etc/shadow {ROOT}/README.md 2>&1; echo LISTING; ls -A {ROOT} 2>/dev/null; true"
    )
    res = _bwrap(["sh", "-c", script], work)
    assert not escape.exists()
    assert host_file.read_text() == "kw10-host-file-secret\n"
    assert not (ROOT / "kw_escape").exists()
    assert "kw10-host-file-secret" not in res.output
    readme = (ROOT / "README.md").read_text().splitlines()[0]
    assert readme not in res.output and "No such file" in res.output
    # The repository shows at most the virtual environment the runner's Python lives in (when it is there).
    assert set(res.stdout.text.split("LISTING", 1)[1].split()) <= {".venv"}


def test_including_a_host_file_fails_as_outside_the_sandbox_and_publishes_none_of_it(
    tmp_path: Path,
    toolchain: Toolchain,
    make_wiki,
    page_text,  # noqa: ANN001
) -> None:
    secret = tmp_path / "host-key.h"
    secret.write_text("kw10_host_key_contents_0123456789 = 1;\n")
    relative = os.path.relpath(secret, "/tmp/kw-build-x")  # from a build folder: ../../…
    body = f"""
```cuda compile
#include "{secret}"
__global__ void k() {{}}
```

```cuda compile
#include "{relative}"
__global__ void k() {{}}
```
"""
    wiki = make_wiki({"p.md": page_text("p", body)})
    from runner.verify import verify

    report = verify(wiki, toolchain=toolchain, cache_dir=tmp_path / "cache", use_cache=False, isolation=ISOLATION_BWRAP)
    compiles = [r for r in report.records if r.step == "compile"]
    assert len(compiles) == 2
    for record in compiles:
        assert record.status == "fail" and record.error_kind == "outside the sandbox", record.message
        assert "outside the sandbox" in record.message
        assert "kw10_host_key_contents" not in json.dumps(record.to_dict())
        assert record.isolation == ISOLATION_BWRAP
        assert record.command.startswith(toolchain.nvcc) and "snippet.cu" in record.command


# -- the environment -----------------------------------------------------------------------------------------


def test_secrets_in_the_runners_environment_reach_neither_output_nor_proc(tmp_path: Path) -> None:
    program = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in ['self', str(os.getppid()), '1'] + [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    try: print(pid, open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError as e: print(pid, e)\n"
    )
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from runner.sandbox import run_process
        res = run_process([sys.executable, "-c", {program!r}], Path({str(tmp_path)!r}), 30, isolation="bwrap")
        print(json.dumps({{"output": res.output, "exit": res.exit_code, "error": res.error, "isolation": res.isolation}}))
    """)
    result = _runner_child(code, tmp_path, SECRETS)
    assert result["error"] is None and result["isolation"] == ISOLATION_BWRAP
    assert result["exit"] == 0, result["output"][-2000:]
    assert "HOME" in result["output"]
    for name, value in SECRETS.items():
        assert value not in result["output"], f"{name} leaked"


def test_secrets_stay_out_of_the_evidence_of_a_program_that_dumps_every_environment(tmp_path: Path) -> None:
    """The whole pipeline (extraction, verify, run step, evidence JSONL) in a runner whose environment holds
    the secrets; the python `run` block dumps os.environ and every /proc/*/environ it can read.

    No GPU is needed for that: the run step is handed a device description (CPU-only machines have none),
    and the program never touches it. Everything else, the sandbox included, is the real thing.
    """
    program = (
        "import os\n"
        "print(sorted(os.environ.items()))\n"
        "for pid in ['self', str(os.getppid()), '1'] + sorted(p for p in os.listdir('/proc') if p.isdigit()):\n"
        "    try: print(pid, open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError as e: print(pid, e)\n"
    )
    page = "---\nid: p\ntitle: P\ntype: concept\narchitectures: [sm90a]\n---\n\n```python run\n" + program + "```\n"
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "p.md").write_text(page)
    report = tmp_path / "evidence.jsonl"
    code = textwrap.dedent(f"""
        import json
        from runner.gpus import Gpu
        from runner.verify import verify
        device = Gpu(index=0, name="described device", compute_capability="9.0")
        result = verify({str(wiki)!r}, use_cache=False, cache_dir={str(tmp_path / "cache")!r}, gpus=[device], isolation="bwrap")
        result.write_jsonl({str(report)!r})
        print(json.dumps({{"records": len(result.records)}}))
    """)
    _runner_child(code, tmp_path, SECRETS)
    text = report.read_text()
    run = [r for r in read_jsonl(report) if r.step == "run"]
    assert len(run) == 1 and run[0].status == "pass", text[-3000:]
    assert run[0].isolation == ISOLATION_BWRAP and "('HOME'," in run[0].output
    for name, value in SECRETS.items():
        assert value not in text, f"{name} leaked into the evidence"


# -- processes --------------------------------------------------------------------------------------------------


def _thousand_forks(marker: str) -> str:
    """A Python program that forks 1000 `sleep MARKER` children, saying how far it got when a fork fails."""
    return textwrap.dedent(f"""
        import os, sys
        made = 0
        for i in range(1000):
            try:
                pid = os.fork()
            except OSError as e:
                print(f"fork failed after {{made}}: {{e}}", flush=True)
                sys.exit(1)
            if pid == 0:
                os.execvp("sleep", ["sleep", "{marker}"])
            made += 1
        print("all 1000 forks made", flush=True)
    """)


def test_a_thousand_forks_hit_the_process_limit_and_leave_nothing(tmp_path: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid() % 1000}"
    program = _thousand_forks(marker)
    limits = Limits(processes=200)
    res = _bwrap([sys.executable, "-c", program], tmp_path, 60, limits=limits)
    assert "fork failed after" in res.output and "all 1000" not in res.output
    made = int(res.output.split("fork failed after ")[1].split(":")[0])
    assert made < 200
    assert resource_limit_hit(res, limits) == "process limit (200 processes and threads) reached"
    assert res.leftovers >= made
    assert gone(lambda: live_with(f"sleep {marker}")) == []


def test_a_spinning_program_is_killed_at_its_timeout_with_everything_it_started(tmp_path: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid() % 1000 + 1}"
    started = time.monotonic()
    res = _bwrap(["sh", "-c", f"(setsid sleep {marker} &); sleep {marker} & while :; do :; done"], tmp_path, 2)
    assert res.timed_out and time.monotonic() - started < 12
    assert gone(lambda: live_with(f"sleep {marker}")) == []


def test_killing_its_launcher_leaves_no_survivor(tmp_path: Path) -> None:
    """The command runs under its own user id: it cannot signal the launcher (root) or escape the pid namespace."""
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid() % 1000 + 2}"
    script = (
        f"kill -9 -1 2>&1; (setsid sleep {marker} > /dev/null 2>&1 &); sleep {marker} > /dev/null 2>&1 & "
        f"kill -9 $PPID 2>&1; kill -9 1 2>&1; echo still here"
    )
    res = run_process(["sh", "-c", script], tmp_path, 20, isolation=ISOLATION_BWRAP)
    assert gone(lambda: live_with(f"sleep {marker}")) == [], "a process the snippet started survived it"
    if os.geteuid() == 0:  # the launcher keeps root: the snippet cannot kill it, so it reports normally
        assert res.error is None and res.exit_code == 0 and "still here" in res.output
        assert res.leftovers >= 1


def test_two_gigabytes_of_output_are_capped_not_kept(tmp_path: Path) -> None:
    res = _bwrap(["sh", "-c", f"yes {'x' * 99} | head -c 2000000000"], tmp_path, 240)  # 20 million lines of 100 bytes
    assert res.exit_code == 0 and not res.timed_out
    assert res.stdout.total_bytes == 2_000_000_000
    assert res.stdout.truncated and len(res.stdout.text) < 70_000
    assert "lines omitted]" in res.stdout.text


# -- network and memory -----------------------------------------------------------------------------------------------


def test_network_connections_reach_nothing(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[object] = []
    listener.settimeout(8)

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    program = textwrap.dedent(f"""
        import socket
        for host, port in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)):
            try:
                socket.create_connection((host, port), timeout=3).close()
                print("connected", host)
            except OSError as e:
                print("refused", host, type(e).__name__)
    """)
    try:
        res = _bwrap([sys.executable, "-c", program], tmp_path, 30)
    finally:
        thread.join()
        listener.close()
    assert accepted == [], "the host's loopback must not be reachable from the sandbox"
    assert "connected" not in res.output and res.output.count("refused") == 3


def test_a_200_gib_allocation_fails_at_once_as_a_resource_limit(tmp_path: Path) -> None:
    limits = run_limits(runner_settings())
    started = time.monotonic()
    res = _bwrap(
        [sys.executable, "-c", "b = bytearray(200 << 30)\nb[::4096] = b'x' * len(b[::4096])"], tmp_path, 30, limits=limits
    )
    assert time.monotonic() - started < 10
    assert not res.timed_out and res.exit_code == 1 and "MemoryError" in res.output
    assert resource_limit_hit(res, limits) == f"host memory limit (RLIMIT_DATA {limits.data_bytes / GiB:g} GiB) reached"


def test_touching_memory_page_by_page_stops_at_the_data_limit(tmp_path: Path) -> None:
    program = (
        "chunks = []\nwhile True:\n    b = bytearray(64 << 20)\n    b[::4096] = b'x' * len(b[::4096])\n    chunks.append(b)\n"
    )
    limits = Limits(address_space_bytes=None, data_bytes=512 * MiB)
    started = time.monotonic()
    res = _bwrap([sys.executable, "-c", program], tmp_path, 30, limits=limits)
    assert time.monotonic() - started < 10 and not res.timed_out
    assert "MemoryError" in res.output
    assert resource_limit_hit(res, limits) == "host memory limit (RLIMIT_DATA 0.5 GiB) reached"


# -- the same attacks from a CUDA program on a GPU ---------------------------------------------------------------------------


HOSTILE_CUDA = r"""
```cuda run
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
extern char** environ;
int main() {
  if (cudaFree(0) != cudaSuccess) { printf("no CUDA\n"); return 3; }
  FILE* f = fopen("/tmp/kw_runner_escape", "w"); if (f) { fputs("pwned", f); fclose(f); }
  for (char** e = environ; *e; ++e) printf("env %s\n", *e);
  char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
  FILE* p = fopen(path, "rb"); if (p) { char buf[4096]; size_t n = fread(buf, 1, sizeof buf, p); for (size_t i = 0; i < n; ++i) if (!buf[i]) buf[i] = ' '; printf("parent env %.*s\n", (int)n, buf); fclose(p); }
  int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(53);
  inet_pton(AF_INET, "1.1.1.1", &a.sin_addr); printf("connect %s\n", connect(s, (sockaddr*)&a, sizeof a) == 0 ? "ok" : "refused");
  int forks = 0; for (int i = 0; i < 1000; ++i) { pid_t c = fork(); if (c < 0) break; if (c == 0) { sleep(60); _exit(0); } ++forks; }
  printf("forks %d\n", forks);
  size_t big = 200ull << 30; char* m = (char*)malloc(big);
  if (!m) { perror("malloc of 200 GiB"); return 1; }
  for (size_t i = 0; i < big; i += 4096) m[i] = 1;
  printf("touched 200 GiB\n");
  return 0;
}
```
"""


@pytest.mark.gpu
def test_hostile_cuda_program_is_contained(tmp_path: Path, toolchain: Toolchain) -> None:
    """The attacks after cudaFree(0) (the driver initialized, its address reservations made), in a subprocess
    runner whose environment holds the secrets: nothing written, no secret, no network, forks and memory capped."""
    from runner.gpus import discover_gpus

    gpus = discover_gpus()
    if not gpus:
        missing_gpu("no NVIDIA GPU here")
    major, minor = gpus[0].compute_capability.split(".")
    arch = f"sm{major}{minor}" + ("a" if int(major) >= 9 else "")
    escape = Path("/tmp/kw_runner_escape")
    if escape.exists():
        pytest.skip("/tmp/kw_runner_escape exists already on this host")
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "h.md").write_text(f"---\nid: h\ntitle: H\ntype: concept\narchitectures: [{arch}]\n---\n" + HOSTILE_CUDA)
    report = tmp_path / "evidence.jsonl"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "verify",
            "--wiki",
            str(wiki),
            "--report",
            str(report),
            "--no-cache",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--isolation",
            "bwrap",
        ],
        cwd=ROOT,
        env={**os.environ, **SECRETS},
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.monotonic() - started
    text = report.read_text()
    run = [r for r in read_jsonl(report) if r.step == "run"]
    assert len(run) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    record = run[0]
    print(
        json.dumps(
            {
                "elapsed_s": round(elapsed, 1),
                "status": record.status,
                "kind": record.error_kind,
                "message": record.message,
                "duration_s": record.duration_s,
            }
        )
    )
    assert record.isolation == ISOLATION_BWRAP and record.gpu_name
    assert not escape.exists()
    for name, value in SECRETS.items():
        assert value not in text, f"{name} leaked into the evidence"
    assert "connect refused" in record.output
    forks = int(record.output.split("forks ")[1].split()[0])
    assert forks < 1000
    assert record.status == "fail" and record.error_kind == "resource limit", record.message
    assert "host memory limit" in record.message and record.duration_s < 30
    assert "touched 200 GiB" not in record.output


@pytest.mark.gpu
def test_a_cupy_program_runs_in_the_sandbox(tmp_path: Path, toolchain: Toolchain) -> None:
    """A python block that uses CuPy sees its site-packages, CUDA headers and the GPU inside bwrap."""
    require_cupy()
    from runner.gpus import discover_gpus
    from runner.verify import verify
    from snippets import extract_snippets

    gpus = discover_gpus()
    if not gpus:
        missing_gpu("no NVIDIA GPU here")
    major, minor = gpus[0].compute_capability.split(".")
    arch = f"sm{major}{minor}" + ("a" if int(major) >= 9 else "")
    body = '```python run output="sum 4950"\nimport cupy as cp\nprint("sum", int(cp.arange(100).sum()))\n```\n'
    snippets, _ = extract_snippets("c", "c.md", body, 1, [arch])
    report = verify(".", snippets=snippets, toolchain=toolchain, cache_dir=tmp_path, use_cache=False, isolation=ISOLATION_BWRAP)
    run = [r for r in report.records if r.step == "run"]
    assert [r.status for r in run] == ["pass"], [r.message + r.output[-2000:] for r in run]
    assert run[0].isolation == ISOLATION_BWRAP


# -- cgroup v2 limits (memory.max, pids.max) where the runner can create cgroups: the H200 node -------------------------


def _cgroup_required(monkeypatch: pytest.MonkeyPatch | None = None) -> RunnerSettings:
    """The settings with KERNELWIKI_CGROUP=require (nothing runs unbounded if a cgroup cannot be made after all);
    skipped where no cgroup v2 with memory and pids can be created (this CPU machine: hugetlb only)."""
    parent, problem = cgroup_parent(runner_settings().cgroup_root)
    if parent is None:
        missing_cgroup(f"no writable cgroup v2 with memory and pids here: {problem}")
    settings = replace(runner_settings(), cgroup=CGROUP_REQUIRE)
    if monkeypatch is not None:  # for verify(), which reads the process-wide settings
        monkeypatch.setattr(runner.settings, "_settings", [settings])
    return settings


@pytest.mark.gpu
def test_memory_max_kills_a_200_gib_allocation_that_no_data_limit_stops(tmp_path: Path) -> None:
    """No RLIMIT_DATA at all: malloc(200 GiB) succeeds (overcommit), touching it is stopped by memory.max alone."""
    settings = _cgroup_required()
    limits = Limits(file_size_bytes=256 * MiB, address_space_bytes=None, data_bytes=None, cgroup_memory_bytes=4 * GiB)
    started = time.monotonic()
    res = _bwrap(
        [sys.executable, "-c", "b = bytearray(200 << 30)\nb[::4096] = b'x' * len(b[::4096])\nprint('touched 200 GiB')"],
        tmp_path,
        60,
        limits=limits,
        settings=settings,
    )
    elapsed = time.monotonic() - started
    print(json.dumps({"elapsed_s": round(elapsed, 2), "signal": res.signal, "cgroup": vars(res.cgroup) if res.cgroup else None}))
    assert res.cgroup is not None and res.limits_in_force.startswith("cgroup v2 memory.max 4 GiB"), res.limits_in_force
    assert not res.timed_out and elapsed < 20 and "touched 200 GiB" not in res.output
    assert res.cgroup.oom_kills >= 1 and res.signal == signal.SIGKILL
    assert resource_limit_hit(res, limits) == (
        f"host memory limit (cgroup memory.max 4 GiB) reached: the kernel killed {res.cgroup.oom_kills} process(es) of it"
    )


@pytest.mark.gpu
def test_a_shared_mapping_passes_the_data_limit_but_not_memory_max(tmp_path: Path) -> None:
    """MAP_SHARED anonymous memory is not counted by RLIMIT_DATA (set here, 4 GiB): without the cgroup this
    would fill the host's memory; with it the kernel stops it at memory.max."""
    settings = _cgroup_required()
    limits = Limits(file_size_bytes=256 * MiB, address_space_bytes=None, data_bytes=4 * GiB)
    program = (
        "import mmap\nm = mmap.mmap(-1, 200 << 30, flags=mmap.MAP_SHARED)\nprint('mapped', flush=True)\n"
        "for i in range(0, len(m), 4096):\n    m[i] = 1\nprint('touched 200 GiB')\n"
    )
    started = time.monotonic()
    res = _bwrap([sys.executable, "-c", program], tmp_path, 60, limits=limits, settings=settings)
    elapsed = time.monotonic() - started
    print(json.dumps({"elapsed_s": round(elapsed, 2), "signal": res.signal, "cgroup": vars(res.cgroup) if res.cgroup else None}))
    assert "mapped" in res.output and "touched 200 GiB" not in res.output, res.output[-2000:]
    assert not res.timed_out and elapsed < 30
    assert res.cgroup is not None and res.cgroup.oom_kills >= 1
    assert resource_limit_hit(res, limits).startswith("host memory limit (cgroup memory.max 4 GiB) reached")  # type: ignore[union-attr]


@pytest.mark.gpu
def test_pids_max_caps_a_thousand_forks_even_where_root_ignores_the_process_rlimit(tmp_path: Path) -> None:
    """Under `none` a root runner's command is root, which RLIMIT_NPROC does not bind: pids.max still does."""
    settings = _cgroup_required()
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid() % 1000 + 3}"
    program = _thousand_forks(marker)
    limits = Limits(processes=200)
    res = run_process([sys.executable, "-c", program], tmp_path, 60, limits=limits, isolation=ISOLATION_NONE, settings=settings)
    assert res.error is None and res.cgroup is not None, res.error
    assert "fork failed after" in res.output and "all 1000" not in res.output, res.output[-2000:]
    assert int(res.output.split("fork failed after ")[1].split(":")[0]) < 200
    if os.geteuid() == 0:  # root: only the cgroup can have refused the fork
        assert res.cgroup.pids_max_hits >= 1
        assert resource_limit_hit(res, limits) == "process limit (cgroup pids.max 200 processes and threads) reached"
    assert gone(lambda: live_with(f"sleep {marker}")) == []


CGROUP_CUDA = r"""
```cuda run output="sum 4096"
#include <cstdio>
__global__ void fill(int* p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 1; }
int main() {
  int* d; cudaMalloc(&d, 4096 * sizeof(int)); fill<<<16, 256>>>(d);
  int h[4096]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  long s = 0; for (int i = 0; i < 4096; ++i) s += h[i];
  printf("sum %ld\n", s); return cudaGetLastError() == cudaSuccess && s == 4096 ? 0 : 1;
}
```

```cuda run
#include <cstdio>
#include <sys/mman.h>
int main() {
  if (cudaFree(0) != cudaSuccess) { printf("no CUDA\n"); return 3; }
  size_t big = 200ull << 30;
  char* m = (char*)mmap(nullptr, big, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) { perror("mmap of 200 GiB"); return 1; }
  printf("mapped\n"); fflush(stdout);
  for (size_t i = 0; i < big; i += 4096) m[i] = 1;
  printf("touched 200 GiB\n");
  return 0;
}
```
"""


@pytest.mark.gpu
def test_cuda_programs_run_in_their_cgroup_and_a_shared_200_gib_mapping_is_killed_at_memory_max(
    tmp_path: Path, toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through verify(), as the wiki's programs run: a normal CUDA program passes inside memory.max 8 GiB and
    pids.max 512 (its record names them and its peak), and a program that maps 200 GiB of shared memory
    (which RLIMIT_DATA does not count) after cudaFree(0) fails as a resource limit in seconds."""
    from runner.gpus import discover_gpus
    from runner.verify import verify
    from snippets import extract_snippets

    _cgroup_required(monkeypatch)
    gpus = discover_gpus()
    if not gpus:
        missing_gpu("no NVIDIA GPU here")
    major, minor = gpus[0].compute_capability.split(".")
    arch = f"sm{major}{minor}" + ("a" if int(major) >= 9 else "")
    snippets, _ = extract_snippets("c", "c.md", CGROUP_CUDA, 1, [arch])
    report = verify(".", snippets=snippets, toolchain=toolchain, cache_dir=tmp_path, use_cache=False, isolation=ISOLATION_BWRAP)
    good, hog = [r for r in report.records if r.step == "run"]
    print(json.dumps({"good": [good.status, good.resources, good.duration_s], "hog": [hog.status, hog.message, hog.duration_s]}))
    limits = run_limits(runner_settings())
    assert good.status == "pass", good.message + good.output[-2000:]
    assert re.match(
        rf"cgroup v2 memory\.max {limits.data_bytes / GiB:g} GiB( \(no swap\))?, pids\.max 512; RLIMIT_DATA",
        good.resources["limits"],
    )
    assert good.resources.get("host_memory_peak_bytes", 1) > 0  # memory.peak: kernels 5.19+
    assert hog.status == "fail" and hog.error_kind == "resource limit", hog.message
    assert "cgroup memory.max" in hog.message and hog.duration_s < 30 and "touched 200 GiB" not in hog.output
