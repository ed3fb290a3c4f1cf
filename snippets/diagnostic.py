"""`Diagnostic`: one problem found in a wiki file, the one type pages, snippets, the runner and the service report.

Printed as `path:line: severity: message` (the form editors and CI logs link to).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a wiki file, naming the file and line."""

    path: str  # file path relative to the wiki root, posix style
    line: int  # 1-based line in the file (1 when the whole file is concerned)
    severity: str  # "error" or "warning"
    message: str  # what is wrong, naming the offending value

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.severity}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)
