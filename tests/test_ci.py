"""The lanes of tests/ci.py: a missing tool skips on a developer's machine and fails where the lane requires it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci import cgroup_v2_delegated, gpu_lane, is_ci, missing_cgroup, missing_gpu, missing_tool


@pytest.mark.parametrize(
    ("value", "on"), [("true", True), ("1", True), ("YES", True), ("", False), ("false", False), ("0", False)]
)
def test_ci_and_gpu_lane_read_the_same_words(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv("CI", value)
    monkeypatch.setenv("KERNELWIKI_GPU_LANE", value)
    assert is_ci() is on and gpu_lane() is on


def test_a_missing_tool_skips_outside_ci_and_fails_under_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no nvcc"):
        missing_tool("no nvcc")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no nvcc \(required under CI=true\)"):
        missing_tool("no nvcc")


def test_a_missing_gpu_fails_only_in_the_gpu_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")  # CI has no GPU: still a skip there
    monkeypatch.delenv("KERNELWIKI_GPU_LANE", raising=False)
    with pytest.raises(pytest.skip.Exception):
        missing_gpu("no GPU")
    monkeypatch.setenv("KERNELWIKI_GPU_LANE", "1")
    with pytest.raises(pytest.fail.Exception, match="KERNELWIKI_GPU_LANE=1"):
        missing_gpu("no GPU")


def test_a_missing_cgroup_fails_where_cgroup_v2_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWIKI_CGROUP", "require")
    with pytest.raises(pytest.fail.Exception, match="KERNELWIKI_CGROUP=require"):
        missing_cgroup("no cgroup")
    monkeypatch.delenv("KERNELWIKI_CGROUP")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        missing_cgroup("no cgroup")


def _tree(tmp_path: Path, controllers: str) -> tuple[Path, Path]:
    root = tmp_path / "cg"
    own = root / "ci" / "job"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text(controllers + "\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/ci/job\n")
    return root, proc


def test_cgroup_v2_counts_as_delegated_with_memory_and_pids_in_a_writable_own_group(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, "cpu memory pids")
    assert cgroup_v2_delegated(root, proc)
    root, proc = _tree(tmp_path / "b", "cpu")
    assert not cgroup_v2_delegated(root, proc)
    v1 = tmp_path / "v1"
    v1.write_text("4:memory:/x\n0::/\n")
    assert not cgroup_v2_delegated(tmp_path / "nothing", v1)
