"""The snippet runner: compiles every wiki snippet for each target, runs programs on matching GPUs,
and records the evidence. Imports only the standard library, markdown-it-py and PyYAML (CuPy and
rich are optional), so that it runs on GPU nodes without the service's web stack.

Entry points: `runner.verify.verify()` and `python3 -m runner verify`.

Importing the package imports nothing else: `kernelwiki` reads `runner.verify_options` at every start,
and the compiler driver (runner.verify, runner.compile, snippets.extract) is imported by the commands that
compile. The evidence names below are re-exported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.evidence import EvidenceRecord, read_jsonl, write_jsonl

__all__ = ["EvidenceRecord", "read_jsonl", "write_jsonl"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from runner import evidence

        return getattr(evidence, name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
