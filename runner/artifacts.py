"""What the compiler produced, kept: normalised SASS and PTX, content-addressed beside the evidence.

`keep_artifacts(build, …)` runs after a clean build. The SASS comes from the disassembler run
*inside the sandbox* on the build's device binary (`nvdisasm --print-line-info --print-code
CUBIN` for a cubin, `cuobjdump -sass` for an executable), read back over the process's stdout:
nothing in the snippet's folder is opened from outside. The PTX is the one the build already
read (`Build.ptx`). Both are normalised (runner/sass.py) and stored once per content:

    ARTIFACTS/ab/abcdef….txt.gz      (sha256 of the normalised text)

so the same listing produced by two toolchains, or by the same snippet on two pages, costs
its bytes once. Each listing is capped at `MAX_LISTING_BYTES`; what one snippet keeps over
all its targets and toolchains at `MAX_SNIPPET_BYTES` (beyond it, hashes are not recorded and
the outcome says so).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path

from runner.compile import disassembly_step
from runner.sass import cap, normalize_ptx, normalize_sass

DEFAULT_ARTIFACTS_DIR = Path("evidence/artifacts")
"""Where artifacts are kept unless told otherwise (beside the committed evidence JSONL)."""

MAX_LISTING_BYTES = 1024 * 1024
"""One normalised listing is cut beyond this."""

MAX_SNIPPET_BYTES = 8 * 1024 * 1024
"""What one snippet may keep over all its targets and toolchains."""

_HASH = re.compile(r"^[0-9a-f]{64}$")


class ArtifactStore:
    """Normalised listings by sha256, gzip-compressed, one file each; safe for concurrent writers."""

    def __init__(self, root: Path | str = DEFAULT_ARTIFACTS_DIR) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._used: dict[str, int] = {}  # snippet id -> bytes recorded in this process

    def path(self, digest: str) -> Path:
        if not _HASH.match(digest):
            raise ValueError(f"not an artifact hash: {digest!r}")
        return self.root / digest[:2] / f"{digest}.txt.gz"

    def put(self, text: str) -> str:
        """Store `text` (once) and return its sha256."""
        data = text.encode()
        digest = hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if path.exists():
            return digest
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(gzip.compress(data, compresslevel=9, mtime=0))
        os.replace(tmp, path)
        return digest

    def get(self, digest: str) -> str | None:
        """The text stored under `digest`, or None (unknown, unreadable or not a hash)."""
        try:
            return gzip.decompress(self.path(digest).read_bytes()).decode()
        except (OSError, ValueError, EOFError):
            return None

    def reserve(self, snippet_id: str, size: int) -> bool:
        """Count `size` bytes against a snippet's cap; False (nothing counted) when it would pass it."""
        with self._lock:
            used = self._used.get(snippet_id, 0)
            if used + size > MAX_SNIPPET_BYTES:
                return False
            self._used[snippet_id] = used + size
            return True


def disassemble(
    binary: str, workdir: Path, nvdisasm: str | None, cuobjdump: str | None, isolation: str | None
) -> tuple[str | None, str]:
    """Raw SASS of `binary` (a path relative to `workdir`), disassembled in the sandbox; (text, "") or (None, why)."""
    if binary.endswith(".cubin") and nvdisasm:
        argv = [nvdisasm, "--print-line-info", "--print-code", binary]
        env: dict[str, str] = {}
    elif cuobjdump and nvdisasm:
        argv = [cuobjdump, "-sass", binary]
        env = {"NVDISASM_PATH": str(Path(nvdisasm).parent)}
    else:
        return None, "no disassembler (`kernelwiki toolchains install disasm`, or nvidia-cuda-nvdisasm)"
    res = disassembly_step(argv, workdir, isolation, env)
    if res.error or res.timed_out or res.exit_code != 0 or res.stdout.truncated:
        why = res.error or ("timed out" if res.timed_out else "output too large" if res.stdout.truncated else res.output[-300:])
        return None, f"{Path(argv[0]).name} failed: {why}"
    return res.stdout.text, ""


def keep_artifacts(
    store: ArtifactStore,
    snippet_id: str,
    binary: str | None,
    ptx: str | None,
    workdir: Path,
    nvdisasm: str | None,
    cuobjdump: str | None,
    isolation: str | None,
) -> dict[str, str]:
    """Normalise and store a build's SASS and PTX; returns {"sass": sha, "ptx": sha} and {"note": why} for what is missing."""
    kept: dict[str, str] = {}
    notes: list[str] = []
    if binary:
        raw, why = disassemble(binary, workdir, nvdisasm, cuobjdump, isolation)
        if raw is None:
            notes.append(why)
        else:
            _put(store, snippet_id, "sass", cap(normalize_sass(raw), MAX_LISTING_BYTES), kept, notes)
    if ptx:
        _put(store, snippet_id, "ptx", cap(normalize_ptx(ptx), MAX_LISTING_BYTES), kept, notes)
    if notes:
        kept["note"] = "; ".join(notes)[:500]
    return kept


def _put(store: ArtifactStore, snippet_id: str, kind: str, text: str, kept: dict[str, str], notes: list[str]) -> None:
    if not store.reserve(snippet_id, len(text.encode())):
        notes.append(f"{kind} not kept: the snippet's artifacts passed {MAX_SNIPPET_BYTES // (1024 * 1024)} MiB")
        return
    kept[kind] = store.put(text)
