"""Finding the CUDA toolchain: nvcc, ptxas, cuobjdump (+ the nvdisasm it needs for SASS), python.

Discovery runs only when asked (no I/O at import) and its result says where each
tool is and which version it is; the version string is part of every cache key
and every evidence record.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.settings import RunnerSettings

VERSION_TIMEOUT_S = 30
"""Limit for `tool --version` calls."""

_RELEASE = re.compile(r"release (\d+\.\d+), V([\d.]+)")


@dataclass
class Toolchain:
    """Where the tools are and what they are; missing tools are None with a reason in `notes`."""

    nvcc: str | None = None  # path of nvcc
    nvcc_version: str | None = None  # e.g. "13.0.88"
    nvcc_release: str | None = None  # e.g. "13.0"
    nvcc_build: str | None = None  # e.g. "cuda_13.0.r13.0/compiler.36424714_0"
    ptxas: str | None = None  # path of ptxas
    cuobjdump: str | None = None  # path of cuobjdump (SASS checks)
    nvdisasm: str | None = None  # path of nvdisasm (cuobjdump -sass needs it since CUDA 13)
    host_compiler: str | None = None  # `g++ --version` first line, part of the fingerprint
    nvrtc: str | None = None  # libnvrtc of a 12.x wheel toolchain (cuda blocks built device-only, runner/nvrtc.py)
    nvrtc_include: tuple[str, ...] = ()  # device headers NVRTC reads (the cuda-runtime wheel's include folder)
    python: str = sys.executable  # interpreter for python blocks
    python_version: str = sys.version.split()[0]
    notes: list[str] = field(default_factory=list)  # why a tool is missing

    @property
    def label(self) -> str:
        """Short name recorded in evidence, e.g. "nvcc 13.0.88" ("nvrtc 12.9.86 (device only)" for a 12.x wheel
        toolchain with NVRTC, "ptxas 12.9.86" for one without)."""
        if self.nvcc_version and not self.nvcc and self.nvrtc and self.ptxas:
            return f"nvrtc {self.nvcc_version} (device only)"
        if self.nvcc_version and not self.nvcc and self.ptxas:
            return f"ptxas {self.nvcc_version}"
        return f"nvcc {self.nvcc_version}" if self.nvcc_version else "nvcc missing"

    @property
    def fingerprint(self) -> str:
        """Everything about the toolchain that can change a build; part of cache keys (SASS tools are
        added to the key only for snippets with SASS checks)."""
        return "|".join(str(x) for x in (self.nvcc_version, self.nvcc_build, self.host_compiler, self.python_version))

    @property
    def sass_tool(self) -> str | None:
        """cuobjdump when it can actually print SASS (it needs nvdisasm), else None."""
        return self.cuobjdump if self.cuobjdump and self.nvdisasm else None

    @property
    def sass_missing_reason(self) -> str:
        if not self.cuobjdump:
            return "cuobjdump not found (install the CUDA toolkit's cuobjdump or `pip install nvidia-cuda-cuobjdump`)"
        return "nvdisasm not found; cuobjdump needs it to print SASS (`pip install nvidia-cuda-nvdisasm`)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _run_version(argv: list[str]) -> str:
    """`tool --version` output ("" when it cannot run), in a throwaway folder, with a timeout."""
    try:
        with tempfile.TemporaryDirectory(prefix="kw-version-") as tmp:
            done = subprocess.run(
                argv, cwd=tmp, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def _site_dirs() -> list[str]:
    dirs: list[str] = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    seen: list[str] = []
    for d in dirs:
        if d and d not in seen and os.path.isdir(d):
            seen.append(d)
    return seen


def _in_site_packages(name: str) -> str | None:
    """A CUDA tool shipped in a pip wheel: site-packages/nvidia/**/bin/NAME."""
    for base in _site_dirs():
        for pattern in (f"{base}/nvidia/*/bin/{name}", f"{base}/nvidia/*/*/bin/{name}", f"{base}/nvidia/bin/{name}"):
            for hit in sorted(glob.glob(pattern)):
                if os.access(hit, os.X_OK):
                    return hit
    return None


def _beside(tool: str | None, name: str) -> str | None:
    """NAME next to `tool`, or next to the file `tool` resolves to (a symlink or a wrapper script)."""
    if not tool:
        return None
    candidates = [Path(tool).parent / name, Path(os.path.realpath(tool)).parent / name]
    try:  # a wrapper script such as `exec /usr/local/cuda-13.0/bin/nvcc "$@"`
        head = Path(tool).read_bytes()[:4096]
        if head.startswith(b"#!"):
            for m in re.finditer(rb"(/[\w./+-]+)/nvcc\b", head):
                candidates.append(Path(m.group(1).decode()) / name)
    except OSError:
        pass
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def _find(name: str, explicit: str | None, nvcc: str | None, search_wheels: bool) -> str | None:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = _beside(nvcc, name) or shutil.which(name)
    if not found:
        for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if home and os.access(os.path.join(home, "bin", name), os.X_OK):
                found = os.path.join(home, "bin", name)
                break
    if not found and search_wheels:
        found = _in_site_packages(name)
    return found


def discover_toolchain(nvcc: str | None = None, settings: RunnerSettings | None = None) -> Toolchain:
    """Find the tools: nvcc from the argument, the settings (`KERNELWIKI_NVCC`), PATH or /usr/local/cuda; the rest beside it.

    `settings` default: read from the environment now (discovery happens once per verification).
    """
    settings = settings or RunnerSettings.from_env()
    tc = Toolchain()
    candidate = nvcc or settings.nvcc or shutil.which("nvcc")
    if not candidate and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        candidate = "/usr/local/cuda/bin/nvcc"
    if candidate and os.access(candidate, os.X_OK):
        text = _run_version([candidate, "--version"])
        m = _RELEASE.search(text)
        if m:
            tc.nvcc = candidate
            tc.nvcc_release, tc.nvcc_version = m.group(1), m.group(2)
            build = re.search(r"Build (\S+)", text)
            tc.nvcc_build = build.group(1) if build else None
        else:
            tc.notes.append(f"{candidate} --version did not report a release")
    else:
        tc.notes.append("nvcc not found (PATH, KERNELWIKI_NVCC, /usr/local/cuda/bin)")
    tc.ptxas = _find("ptxas", settings.ptxas, tc.nvcc, search_wheels=False)
    tc.cuobjdump = _find("cuobjdump", settings.cuobjdump, tc.nvcc, search_wheels=True)
    tc.nvdisasm = _find("nvdisasm", settings.nvdisasm, tc.nvcc, search_wheels=True)
    if tc.cuobjdump and not tc.nvdisasm:
        tc.nvdisasm = _beside(tc.cuobjdump, "nvdisasm")
    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx:
        first = _run_version([gxx, "--version"]).splitlines()
        tc.host_compiler = first[0].strip() if first else None
    return tc
