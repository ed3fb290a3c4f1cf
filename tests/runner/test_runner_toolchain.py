"""Finding nvcc, ptxas and cuobjdump (also inside the nvidia-cuda-cuobjdump wheel), and GPU matching."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runner import toolchain as tcmod
from runner.gpus import Gpu, discover_gpus_cached, matches, missing_reason, parse_nvidia_smi, pick_gpu


def _exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_nvcc_from_environment_and_its_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _exe(
        tmp_path / "cuda" / "bin" / "nvcc",
        "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\necho 'Build cuda_12.8.r12.8/compiler.35583870_0'\n",
    )
    _exe(tmp_path / "cuda" / "bin" / "ptxas")
    monkeypatch.setenv("KERNELWIKI_NVCC", str(fake))
    tc = tcmod.discover_toolchain()
    assert (tc.nvcc, tc.nvcc_version, tc.nvcc_release) == (str(fake), "12.8.93", "12.8")
    assert tc.nvcc_build == "cuda_12.8.r12.8/compiler.35583870_0"
    assert tc.ptxas == str(tmp_path / "cuda" / "bin" / "ptxas")
    assert tc.label == "nvcc 12.8.93"


def test_missing_nvcc_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWIKI_NVCC", str(tmp_path / "nope"))
    tc = tcmod.discover_toolchain()
    assert tc.nvcc is None and tc.notes and tc.label == "nvcc missing"


def test_cuobjdump_and_nvdisasm_are_found_in_site_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    cuobjdump = _exe(site / "nvidia" / "cu13" / "bin" / "cuobjdump")
    nvdisasm = _exe(site / "nvidia" / "cu13" / "bin" / "nvdisasm")
    monkeypatch.setattr(tcmod, "_site_dirs", lambda: [str(site)])
    monkeypatch.setattr(tcmod.shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if os.access("/usr/local/cuda/bin/cuobjdump", os.X_OK):
        pytest.skip("a system cuobjdump takes precedence here")
    assert tcmod._find("cuobjdump", None, None, search_wheels=True) == str(cuobjdump)
    assert tcmod._find("nvdisasm", None, None, search_wheels=True) == str(nvdisasm)


def test_the_tools_named_in_the_settings_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.settings import RunnerSettings

    fake = _exe(tmp_path / "a" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    ptxas = _exe(tmp_path / "b" / "ptxas")
    monkeypatch.setenv("KERNELWIKI_NVCC", str(tmp_path / "not-this-one"))
    tc = tcmod.discover_toolchain(settings=RunnerSettings(nvcc=str(fake), ptxas=str(ptxas)))
    assert (tc.nvcc, tc.ptxas) == (str(fake), str(ptxas))
    env = {
        "KERNELWIKI_NVCC": " /opt/cuda/bin/nvcc ",
        "KERNELWIKI_CUOBJDUMP": "/x/cuobjdump",
        "KERNELWIKI_NVDISASM": "/x/nvdisasm",
    }
    settings = RunnerSettings.from_env(env)
    assert (settings.nvcc, settings.ptxas, settings.cuobjdump, settings.nvdisasm) == (
        "/opt/cuda/bin/nvcc",
        None,
        "/x/cuobjdump",
        "/x/nvdisasm",
    )


def test_sass_tool_needs_both_cuobjdump_and_nvdisasm() -> None:
    tc = tcmod.Toolchain(cuobjdump="/x/cuobjdump")
    assert tc.sass_tool is None and "nvdisasm" in tc.sass_missing_reason
    assert "cuobjdump not found" in tcmod.Toolchain().sass_missing_reason
    assert tcmod.Toolchain(cuobjdump="/x/cuobjdump", nvdisasm="/x/nvdisasm").sass_tool == "/x/cuobjdump"


def test_gpu_matching_by_compute_capability() -> None:
    h200, b200, b300 = Gpu(0, "NVIDIA H200", "9.0"), Gpu(1, "NVIDIA B200", "10.0"), Gpu(2, "NVIDIA B300", "10.3")
    assert matches(h200, "sm_90a") and matches(h200, "sm_90") and not matches(h200, "sm_100a")
    assert matches(b200, "sm_100a") and not matches(b300, "sm_100a") and matches(b300, "sm_100f")
    assert not matches(h200, "sm_80")
    assert pick_gpu([h200, b200], "sm_100a") is b200
    assert pick_gpu([h200], "sm_100a") is None
    assert missing_reason("sm_100a") == "no sm_100 device here"


def test_nvidia_smi_output_is_parsed() -> None:
    text = "0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H200, 9.0, 580.82.07\n"
    (gpu,) = parse_nvidia_smi(text)
    assert gpu == Gpu(0, "NVIDIA H200", "9.0", "580.82.07", "GPU-1a2b3c4d-0000-1111-2222-333344445555")
    assert gpu.visible_devices == "GPU-1a2b3c4d-0000-1111-2222-333344445555"


def test_no_driver_means_no_gpus_without_asking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner import gpus

    monkeypatch.setattr(gpus, "driver_present", lambda: False)
    monkeypatch.setattr(gpus, "discover_gpus", lambda: pytest.fail("must not be called"))
    assert discover_gpus_cached(tmp_path) == []
