"""The snippet runner: compiles every wiki snippet for each target, runs programs on matching GPUs,
and records the evidence. Imports only the standard library, markdown-it-py and PyYAML (CuPy and
rich are optional), so that it runs on GPU nodes without the service's web stack.

Entry points: `runner.verify.verify()` and `python3 -m runner verify`.
"""

from runner.evidence import EvidenceRecord, read_jsonl, write_jsonl
from runner.verify import VerifyReport, verify

__all__ = ["EvidenceRecord", "VerifyReport", "read_jsonl", "verify", "write_jsonl"]
