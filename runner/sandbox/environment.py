"""The environment of a sandboxed command: an allow-list, with names that look like credentials dropped."""

from __future__ import annotations

import os
import re
from pathlib import Path

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASS$|DATABASE_URL|KERNELWIKI_DB|KERNELWIKI_RUNNER_TOKEN|CREDENTIAL|API_KEY|PRIVATE_KEY|AUTH|_KEY$|DSN",
    re.I,
)
"""Names that look like credentials: dropped even when an allow-listed prefix (CUDA_, NVIDIA_) matches them."""

ENV_ALLOWED = frozenset({"PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ"})
ENV_ALLOWED_PREFIXES = ("CUDA_", "NVIDIA_", "LC_")
"""The environment a sandboxed command may see from the runner's; everything else is dropped."""


def sandbox_environment(
    workdir: Path | str,
    extra: dict[str, str] | None = None,
    base: dict[str, str] | None = None,
    passthrough: tuple[str, ...] = (),
) -> dict[str, str]:
    """The environment of a sandboxed command, by allow-list.

    From `base` (default: this process's environment) only PATH,
    LD_LIBRARY_PATH, LANG/LANGUAGE/LC_*, TZ and CUDA_*/NVIDIA_* (minus names
    that look like credentials) and the names in `passthrough` (the explicit
    setting) are kept; HOME and TMPDIR are the snippet's own folder; `extra`
    (what the runner itself sets, e.g. CUDA_VISIBLE_DEVICES) comes last.
    """
    source = os.environ if base is None else base
    env: dict[str, str] = {}
    for name, value in source.items():
        allowed = name in ENV_ALLOWED or (name.startswith(ENV_ALLOWED_PREFIXES) and not SECRET_NAME.search(name))
        if allowed or name in passthrough:
            env[name] = value
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = env["TMPDIR"] = str(workdir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env
