"""Several CUDA toolchains side by side: installed from pip wheels into a project folder, one chosen per job.

`install_toolchain("13.1", root)` runs `python -m pip install --no-deps --target ROOT/13.1 …` with the
wheels of that release (nothing system-wide); `installed_toolchains(root)` finds what is there;
`select_toolchain("13.1", root)` returns the runner's `Toolchain` for it ("system" is the nvcc on
PATH, runner/toolchain.py).

What each release's wheels hold (measured, see docs/benchmarks.md):

* 13.x: `nvidia-cuda-nvcc` is a full nvcc (nvcc, cudafe++, ptxas, nvlink, fatbinary); it needs
  `nvidia-nvvm` (cicc, libnvvm), `nvidia-cuda-crt` (crt headers) and `nvidia-cuda-runtime`
  (headers, cudart) and `nvidia-cuda-cccl` (libcu++: `nv/target`, which cuda_runtime.h includes) of
  the same release, else nvcc stops with "Unsupported .version" or a missing header. Everything
  lands under `nvidia/cu13/`; a program links with `-L…/nvidia/cu13/lib`.
* 12.x: `nvidia-cuda-nvcc-cu12` holds ptxas, libnvvm and the crt headers, no nvcc and no
  cudafe++: a 12.x toolchain here assembles PTX (`ptx` blocks) and nothing else. CUDA C++
  through 12.x would need NVRTC (`nvidia-cuda-nvrtc-cu12`) and a device-only prelude; not done.
* The disassembler is one for all toolchains: the newest `nvidia-cuda-nvdisasm` (and
  `nvidia-cuda-cuobjdump`), installed as `disasm` (the wheels exist from 13.2 on; a newer
  nvdisasm reads older cubins). One disassembler means a diff between toolchains shows the
  compilers' differences, not the disassemblers'.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.nvrtc import NVRTC_RECIPE
from runner.toolchain import Toolchain, discover_toolchain

DEFAULT_TOOLCHAINS_DIR = Path(".kernelwiki/toolchains")
"""Where `kernelwiki toolchains install` puts the wheels (KERNELWIKI_TOOLCHAINS overrides)."""

DISASM = "disasm"
"""Folder name (and pseudo-release) of the shared disassembler."""

SYSTEM = "system"
"""The nvcc found on PATH / KERNELWIKI_NVCC / /usr/local/cuda."""

INSTALL_TIMEOUT_S = 1800
"""Limit for one `pip install` of a toolchain (downloads of ~110 MB on a slow link)."""

MANIFEST = "kernelwiki-toolchain.json"
"""What an install wrote: release, packages and versions, size, seconds."""

_RELEASE = re.compile(r"^(\d{2})\.(\d{1,2})$")


class ToolchainError(ValueError):
    """A release that cannot be installed or selected; the message says which and why."""


def toolchains_dir(environ: dict[str, str] | None = None) -> Path:
    """KERNELWIKI_TOOLCHAINS, else `.kernelwiki/toolchains` of the current folder."""
    env = os.environ if environ is None else environ
    return Path(env.get("KERNELWIKI_TOOLCHAINS") or DEFAULT_TOOLCHAINS_DIR)


def release_key(release: str) -> tuple[int, int]:
    """ "12.9" < "13.0" < "13.10": releases in numeric order ("system" and unknown ones first)."""
    m = _RELEASE.match(release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def packages_for(release: str) -> list[str]:
    """The pip requirements of one release (pinned to that release), or of the disassembler."""
    if release == DISASM:
        return ["nvidia-cuda-nvdisasm", "nvidia-cuda-cuobjdump"]
    m = _RELEASE.match(release)
    if not m:
        raise ToolchainError(f"'{release}' is not a CUDA release: write it as MAJOR.MINOR, e.g. 12.9 or 13.1")
    major = int(m.group(1))
    if major == 12:
        # ptxas (and libnvvm) only: NVRTC of the same release compiles CUDA C++ to PTX with the device headers
        # (cuda_fp16.h, …) of the runtime wheel (runner/nvrtc.py)
        return [f"nvidia-cuda-{name}-cu12=={release}.*" for name in ("nvcc", "nvrtc", "runtime")]
    if major == 13:
        pinned = [f"nvidia-{name}=={release}.*" for name in ("cuda-nvcc", "nvvm", "cuda-crt", "cuda-runtime")]
        # nvidia-cuda-cccl follows the CUDA release up to 13.2 (13.2.86); from 13.3 on its version is "13." + CCCL's own
        # (13.3.5.0.6 = CCCL 3.5.0.6) and no 13.4.*/13.5.* exists: those take the newest CCCL made for CUDA 13.
        cccl = f"nvidia-cuda-cccl=={release}.*" if int(m.group(2)) <= 2 else "nvidia-cuda-cccl>=13.3,<14"
        return [*pinned, cccl]
    raise ToolchainError(f"CUDA {release}: only 12.x and 13.x toolchains come as pip wheels")


@dataclass
class InstallResult:
    """What one `install_toolchain` did."""

    release: str  # e.g. "13.1", or "disasm"
    folder: str  # where the wheels are
    packages: dict[str, str] = field(default_factory=dict)  # distribution name -> version installed
    bytes_on_disk: int = 0  # size of the folder after the install
    seconds: float = 0.0  # wall-clock time of pip
    already: bool = False  # it was there; nothing was downloaded
    error: str = ""  # why it failed ("" on success)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _installed_versions(folder: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for meta in folder.glob("*.dist-info/METADATA"):
        name = version = ""
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines()[:20]:
            if line.startswith("Name: "):
                name = line[6:].strip()
            elif line.startswith("Version: "):
                version = line[9:].strip()
        if name:
            found[name] = version
    return dict(sorted(found.items()))


def install_toolchain(release: str, root: Path, *, pip_args: list[str] | None = None, force: bool = False) -> InstallResult:
    """Install one release's wheels into ROOT/RELEASE with pip (no dependencies pulled in, nothing system-wide)."""
    wanted = packages_for(release)
    folder = root / release
    result = InstallResult(release, str(folder))
    if (folder / MANIFEST).is_file() and not force:
        complete_layout(folder)  # installs made before the layout links
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        have = {name.lower() for name in data.get("packages", {})}
        if {re.split(r"[=<>!~]", spec)[0].lower() for spec in wanted} <= have:
            result.packages, result.bytes_on_disk, result.already = data.get("packages", {}), data.get("bytes_on_disk", 0), True
            return result
        # else an install of an older wheel set (a 12.x one before NVRTC): completed below
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade", "--target", str(folder), *(pip_args or []), *wanted]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        result.error = f"pip did not finish: {exc}"
        return result
    result.seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if "ERROR" in ln] or (done.stderr or "").splitlines()[-3:]
        result.error = f"pip install {' '.join(wanted)} failed: " + " / ".join(lines)[:600]
        return result
    complete_layout(folder)
    result.packages = _installed_versions(folder)
    result.bytes_on_disk = _folder_size(folder)
    manifest = {"release": release, "packages": result.packages, "bytes_on_disk": result.bytes_on_disk, "seconds": result.seconds}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return result


LAYOUT = "layout-2"
"""Version of what `complete_layout` adds; part of a wheel toolchain's fingerprint."""

_LAYOUT_LINKS = (("lib64", "lib"), ("targets/x86_64-linux/include", "../../include"), ("targets/x86_64-linux/lib", "../../lib"))


def complete_layout(folder: Path) -> None:
    """Give a 13.x wheel install the toolkit layout its own nvcc.profile expects.

    nvcc.profile links with `-L$(TOP)/targets/x86_64-linux/lib` (and includes from
    `targets/x86_64-linux/include`), which the wheels do not have: every program failed to link
    (`ld: cannot find -lcudart_static`). The links are relative and stay inside the install folder
    (the folder the sandbox binds); /usr/local/cuda-13.0 of this machine has the same three.
    """
    for top in folder.glob("nvidia/cu1*"):
        if not (top / "bin" / "nvcc").is_file():
            continue
        for name, target in _LAYOUT_LINKS:
            link = top / name
            if not link.exists() and not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target)


def _tool(folder: Path, name: str) -> str | None:
    for hit in sorted(folder.resolve().glob(f"nvidia/*/bin/{name}")):
        if os.access(hit, os.X_OK):
            return str(hit)
    return None


def _nvrtc(folder: Path) -> tuple[str | None, tuple[str, ...]]:
    """libnvrtc of a 12.x install and the include folders of its device headers (cuda_fp16.h, …), where present."""
    libs = sorted(folder.resolve().glob("nvidia/cuda_nvrtc/lib/libnvrtc.so.*[0-9]"))
    include = folder.resolve() / "nvidia" / "cuda_runtime" / "include"
    if not libs or not (include / "cuda_fp16.h").is_file():
        return None, ()
    return str(libs[0]), (str(include),)


def disassembler(root: Path) -> tuple[str | None, str | None]:
    """(nvdisasm, cuobjdump) of the shared disassembler install, where present."""
    folder = root / DISASM
    return _tool(folder, "nvdisasm"), _tool(folder, "cuobjdump")


def installed_releases(root: Path) -> list[str]:
    """Releases installed under `root`, oldest first (the disassembler not counted)."""
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir() if p.is_dir() and _RELEASE.match(p.name) and (p / MANIFEST).is_file()]
    return sorted(found, key=release_key)


_PTXAS_RELEASE = re.compile(r"release (\d+\.\d+), V([\d.]+)")


def select_toolchain(release: str, root: Path) -> Toolchain:
    """The Toolchain of an installed release ("system": the one on PATH), with the shared disassembler.

    Raises ToolchainError naming the release when it is not installed.
    """
    nvdisasm, cuobjdump = disassembler(root)
    if release == SYSTEM:
        tc = discover_toolchain()
    else:
        folder = root / release
        if not (folder / MANIFEST).is_file():
            have = ", ".join(installed_releases(root)) or "none"
            raise ToolchainError(
                f"CUDA {release} is not installed under {root} (installed: {have}); run `kernelwiki toolchains install {release}`"
            )
        nvcc = _tool(folder, "nvcc")
        wheels = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("packages", {})
        if nvcc:
            tc = discover_toolchain(nvcc)
            tc.ptxas = _tool(folder, "ptxas")
        else:  # 12.x wheels: ptxas, and NVRTC for device code (runner/nvrtc.py)
            tc = Toolchain()
            tc.ptxas = _tool(folder, "ptxas")
            tc.nvrtc, tc.nvrtc_include = _nvrtc(folder)
            if tc.nvrtc:
                tc.notes.append(
                    f"CUDA {release} wheels hold no nvcc: cuda blocks are built device-only with NVRTC, cpp blocks not"
                )
            else:
                tc.notes.append(
                    f"CUDA {release} wheels hold ptxas and libnvvm but no nvcc, and NVRTC is not installed: cuda and cpp blocks "
                    f"are not built (`kernelwiki toolchains install --force {release}` adds NVRTC)"
                )
            if tc.ptxas:
                m = _PTXAS_RELEASE.search(
                    subprocess.run([tc.ptxas, "--version"], capture_output=True, text=True, timeout=30).stdout
                )
                if m:
                    tc.nvcc_release, tc.nvcc_version = m.group(1), m.group(2)
                    tc.nvcc_build = f"nvrtc+{NVRTC_RECIPE}" if tc.nvrtc else "ptxas-only"
        # The wheels installed are part of what builds (a missing header package changes results): in the fingerprint.
        tc.nvcc_build = f"{tc.nvcc_build}+{LAYOUT}+" + ",".join(f"{k}=={v}" for k, v in sorted(wheels.items()))
    if nvdisasm:
        tc.nvdisasm = nvdisasm
    if cuobjdump:
        tc.cuobjdump = cuobjdump
    return tc


def toolchain_release(tc: Toolchain) -> str:
    """The release a Toolchain is ("13.0"), "" when unknown."""
    return tc.nvcc_release or ""


def expand(names: list[str], root: Path) -> list[str]:
    """`--toolchains all` → every installed release plus "system"; otherwise the names as given."""
    out: list[str] = []
    for name in names:
        for part in name.split(","):
            part = part.strip()
            if part == "all":
                out += [SYSTEM, *installed_releases(root)]
            elif part:
                out.append(part)
    return list(dict.fromkeys(out))
