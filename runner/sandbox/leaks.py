"""Include paths a failed compile reached for outside what the sandbox shows (`#include "/etc/…"`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from runner.sandbox.wrapper import is_under, sandbox_roots
from runner.settings import RunnerSettings

_INCLUDE_ERROR = re.compile(
    r'cannot open source file "([^"]+)"'  # EDG front end (cudafe++)
    r"|fatal error: ([^\s:][^:\n]*): No such file or directory"  # gcc / clang preprocessor
)


def paths_outside_sandbox(output: str, workdir: Path | str, settings: RunnerSettings | None = None) -> list[str]:
    """Files a failed compile tried to include that lie outside what the sandbox shows (its folder and
    the read-only system and toolchain folders), as written in the source."""
    work = str(Path(workdir).resolve())
    roots = sandbox_roots(settings) + [work]
    found: list[str] = []
    for m in _INCLUDE_ERROR.finditer(output):
        name = (m.group(1) or m.group(2) or "").strip()
        if not name or name in found:
            continue
        resolved = os.path.normpath(os.path.join(work, name))
        if (os.path.isabs(name) or ".." in Path(name).parts) and not is_under(resolved, roots):
            found.append(name)
    return found
