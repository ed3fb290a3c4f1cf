"""Running one compile or one program: a fresh process, its own folder, limits, and isolation.

This module is the runner's trust boundary (docs/sandbox.md): whoever can edit a
page can run code here. Every command runs under `runner/launch.py` (resource
limits, wall-clock timeout, killing of every leftover descendant, exact exit
status) inside an isolation wrapper:

* `bwrap` (bubblewrap, the default and the only level that is a boundary): a
  fresh root holding read-only binds of the system and toolchain directories
  (/usr, /lib*, /bin, the dynamic linker's /etc files, the Python the runner
  uses, the tool being run), the GPU device nodes for runs, a private /tmp,
  /dev and /proc, and the snippet's own folder writable; no network, separate
  pid/ipc/uts namespaces, no capabilities, and, when the runner is root, a
  user id of its own so the process limit counts per sandbox;
* `unshare-net` (util-linux `unshare`): no network and a separate pid namespace,
  but the host file system is visible;
* `none`: only the launcher's limits and process cleanup.

Weaker levels are never chosen silently: when bubblewrap cannot be used and
weaker isolation was not asked for, nothing runs and the error says how to
install it. The level in force is returned with every result, so evidence never
claims more than was in force. The environment is built from an allow-list.
Output is read incrementally and capped: a program printing gigabytes costs
neither memory nor disk.

One module per job:

* `environment`: the environment allow-list and the names dropped as secrets;
* `wrapper`: bubblewrap's (or unshare's) command line and the folders it binds;
* `isolation`: which level works here, probed once per process and cached;
* `uids`: a user id of its own per concurrent sandbox when the runner is root;
* `workdir`: the fresh (tmpfs) folder of each build or run;
* `limits`: resource limits, the command's cgroup v2, and their description;
* `process`: starting the launcher in the wrapper, reading output and files back;
* `diagnosis`: which limit a failed command ran into;
* `leaks`: include paths outside the sandbox a failed compile reached for.

Output capping lives in runner/output.py (the service uses it too).
"""

from runner.sandbox.diagnosis import resource_limit_hit
from runner.sandbox.environment import ENV_ALLOWED, ENV_ALLOWED_PREFIXES, SECRET_NAME, sandbox_environment
from runner.sandbox.errors import SandboxUnavailable
from runner.sandbox.isolation import INSTALL_HINT, detect_isolation, isolation_problem
from runner.sandbox.leaks import paths_outside_sandbox
from runner.sandbox.limits import (
    COMPILE_CPU_SECONDS,
    COMPILE_LIMITS,
    GPU_RUN_LIMITS,
    WORKER_CGROUP_DEFAULT,
    Limits,
    cgroup_problem,
    describe_limits,
    run_limits,
)
from runner.sandbox.process import COLLECT_CAP_BYTES, ProcessResult, parse_collected, run_process
from runner.sandbox.workdir import SNIPPET_FOLDER_BYTES, folder_capped, new_workdir, remove_workdir, sweep_stale_workdirs
from runner.sandbox.wrapper import (
    GPU_DEVICE_GLOBS,
    SANDBOX_SHM_BYTES,
    SANDBOX_TMP_BYTES,
    find_bwrap,
    isolation_prefix,
    sandbox_roots,
)
from runner.settings import ISOLATION_AUTO, ISOLATION_BWRAP, ISOLATION_NONE, ISOLATION_UNSHARE, GiB, MiB, runner_settings

__all__ = [
    "COLLECT_CAP_BYTES",
    "COMPILE_CPU_SECONDS",
    "COMPILE_LIMITS",
    "ENV_ALLOWED",
    "ENV_ALLOWED_PREFIXES",
    "GPU_DEVICE_GLOBS",
    "GPU_RUN_LIMITS",
    "INSTALL_HINT",
    "ISOLATION_AUTO",
    "ISOLATION_BWRAP",
    "ISOLATION_NONE",
    "ISOLATION_UNSHARE",
    "SANDBOX_SHM_BYTES",
    "SANDBOX_TMP_BYTES",
    "SECRET_NAME",
    "SNIPPET_FOLDER_BYTES",
    "WORKER_CGROUP_DEFAULT",
    "GiB",
    "Limits",
    "MiB",
    "ProcessResult",
    "SandboxUnavailable",
    "cgroup_problem",
    "describe_limits",
    "detect_isolation",
    "find_bwrap",
    "folder_capped",
    "isolation_prefix",
    "isolation_problem",
    "new_workdir",
    "parse_collected",
    "paths_outside_sandbox",
    "remove_workdir",
    "resource_limit_hit",
    "run_limits",
    "run_process",
    "runner_settings",
    "sandbox_environment",
    "sandbox_roots",
    "sweep_stale_workdirs",
]
