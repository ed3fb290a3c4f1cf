"""Which GPUs this machine has, and which of them may run a program built for a target.

A program is run only on a GPU whose compute capability matches its target
(`snippets.architectures.runs_on`: `sm_90a` on 9.0, `sm_100f` on any 10.x).
Discovery uses CuPy where it is installed and `nvidia-smi` otherwise; a machine
without an NVIDIA driver is recognised without starting either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from snippets.architectures import runs_on

NVIDIA_SMI_TIMEOUT_S = 30
"""Limit for the `nvidia-smi` query."""


@dataclass(frozen=True)
class Gpu:
    """One GPU as the runner sees it."""

    index: int  # CUDA device ordinal
    name: str  # e.g. "NVIDIA H200"
    compute_capability: str  # e.g. "9.0"
    driver_version: str | None = None  # e.g. "580.82.07"
    uuid: str | None = None  # e.g. "GPU-…", used for CUDA_VISIBLE_DEVICES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def visible_devices(self) -> str:
        """Value of CUDA_VISIBLE_DEVICES that selects exactly this GPU."""
        if self.uuid:
            return self.uuid
        parent = os.environ.get("CUDA_VISIBLE_DEVICES")
        if parent:
            items = [x.strip() for x in parent.split(",") if x.strip()]
            if self.index < len(items):
                return items[self.index]
        return str(self.index)


def matches(gpu: Gpu, target: str) -> bool:
    """May a program built for `target` run on `gpu` as evidence for that target? (rule: snippets/architectures.py)"""
    return runs_on(target, gpu.compute_capability)


def missing_reason(target: str) -> str:
    """The `skipped` message when no GPU matches."""
    if target == "any":
        return "no NVIDIA GPU here"
    return f"no {target.removesuffix('a').removesuffix('f')} device here"


def pick_gpu(gpus: list[Gpu], target: str) -> Gpu | None:
    """The first GPU that matches `target`, or None."""
    return next((g for g in gpus if matches(g, target)), None)


def driver_present() -> bool:
    """Cheap check: is an NVIDIA kernel driver loaded? (No driver, no GPU, no need to ask further.)"""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _from_cupy() -> list[Gpu] | None:
    try:
        import cupy  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - CuPy absent or broken: fall back
        return None
    try:
        runtime = cupy.cuda.runtime
        count = runtime.getDeviceCount()
        version = runtime.driverGetVersion()
        driver = f"CUDA {version // 1000}.{(version % 1000) // 10}"
        out: list[Gpu] = []
        for i in range(count):
            props = runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            raw_uuid = props.get("uuid")
            uuid = None
            if isinstance(raw_uuid, (bytes, bytearray)) and len(raw_uuid) == 16:
                h = raw_uuid.hex()
                uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            out.append(Gpu(i, name, f"{props['major']}.{props['minor']}", driver, uuid))
        return out
    except Exception:  # noqa: BLE001 - no device, no driver
        return None


def _from_nvidia_smi() -> list[Gpu]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        with tempfile.TemporaryDirectory(prefix="kw-smi-") as tmp:
            done = subprocess.run(
                [smi, "--query-gpu=index,uuid,name,compute_cap,driver_version", "--format=csv,noheader"],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=NVIDIA_SMI_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=index,uuid,name,compute_cap,driver_version --format=csv,noheader`."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        index, uuid, name, cc, driver = parts
        gpus.append(Gpu(int(index), name, cc, driver, uuid if uuid.startswith("GPU-") else None))
    return gpus


def discover_gpus() -> list[Gpu]:
    """Local GPUs: CuPy where importable, else nvidia-smi; [] where no NVIDIA driver is loaded."""
    if not driver_present():
        return []
    gpus = _from_cupy()
    smi = _from_nvidia_smi() if (gpus is None or gpus) else []
    if gpus is None:
        return smi
    if smi:  # nvidia-smi knows the driver's release; CuPy only the CUDA version it supports
        by_uuid = {g.uuid: g for g in smi if g.uuid}
        merged: list[Gpu] = []
        for g in gpus:
            twin = by_uuid.get(g.uuid) if g.uuid else None
            twin = twin or (smi[g.index] if g.index < len(smi) else None)
            merged.append(replace(g, driver_version=twin.driver_version) if twin else g)
        gpus = merged
    return gpus


def _driver_fingerprint() -> str | None:
    """What identifies this boot's GPU set cheaply: boot id, driver version, GPU bus ids, visible devices."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        driver = Path("/proc/driver/nvidia/version").read_text().strip()
        buses = sorted(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return None
    return "|".join([boot, driver, ",".join(buses), os.environ.get("CUDA_VISIBLE_DEVICES", "*")])


def discover_gpus_cached(cache_dir: Path | str | None) -> list[Gpu]:
    """`discover_gpus`, remembered in `cache_dir` for as long as the boot, driver and GPU set are the same.

    Starting CuPy or nvidia-smi costs up to seconds; a warm re-verification must not pay it.
    """
    if not driver_present():
        return []
    fingerprint = _driver_fingerprint()
    path = Path(cache_dir) / "gpus.json" if cache_dir and fingerprint else None
    if path is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("fingerprint") == fingerprint:
                return [Gpu(**g) for g in data["gpus"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    gpus = discover_gpus()
    if path is not None and gpus:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"fingerprint": fingerprint, "gpus": [g.to_dict() for g in gpus]}), encoding="utf-8")
        except OSError:
            pass
    return gpus
