"""compose.yaml: every service builds from a real Dockerfile stage, runs a real CLI command, and holds no secret."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from app.cli.main import cli
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
STAGES = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
WORKERS = [name for name in SERVICES if name.startswith("worker-")]
ENTRYPOINT_OF_RUNNER = ["kernelwiki", "worker"]  # the Dockerfile's runner ENTRYPOINT


def _argv(service: dict[str, Any]) -> list[str]:
    command = list(service["command"])
    if service.get("build", {}).get("target") == "runner":
        return ENTRYPOINT_OF_RUNNER + command
    return command


def test_every_build_target_is_a_dockerfile_stage() -> None:
    built = {name: s["build"]["target"] for name, s in SERVICES.items() if "build" in s}
    assert built, "no service builds an image"
    for name, target in built.items():
        assert target in STAGES, f"{name} builds stage {target!r}; the Dockerfile has {sorted(STAGES)}"


def test_every_image_without_build_is_built_by_another_service() -> None:
    built_images = {s["image"] for s in SERVICES.values() if "build" in s}
    for name, s in SERVICES.items():
        if "build" not in s and not s["image"].startswith("postgres:"):
            assert s["image"] in built_images, f"{name} uses {s['image']}, which no service builds"


@pytest.mark.parametrize("name", [n for n in SERVICES if n != "db"])
def test_command_parses_with_the_real_cli(name: str) -> None:
    argv = _argv(SERVICES[name])
    assert argv[0] == "kernelwiki"
    command = typer.main.get_command(cli)
    # make_context parses options exactly as the CLI would, raising on an unknown one.
    ctx = command.make_context("kernelwiki", argv[1:], resilient_parsing=False)
    sub = command.get_command(ctx, argv[1])  # type: ignore[attr-defined]
    assert sub is not None, f"{name}: no command {argv[1]!r}"
    sub.make_context(argv[1], argv[2:])


def test_every_kernelwiki_variable_is_a_setting() -> None:
    known = {f"KERNELWIKI_{field.upper()}" for field in Settings.model_fields}
    for name, s in SERVICES.items():
        for key in s.get("environment", {}) or {}:
            if key.startswith("KERNELWIKI_"):
                assert key in known, f"{name} sets {key}, which app/settings.py does not read"


def test_workers_hold_no_index_database_and_serve_known_targets() -> None:
    assert WORKERS
    targets = set(Settings(targets=yaml.safe_load(SERVICES["service"]["environment"]["KERNELWIKI_TARGETS"])).targets)
    for name in WORKERS:
        env = SERVICES[name]["environment"]
        assert "KERNELWIKI_DB" not in env, f"{name} must not hold the index database URL"
        assert env["KERNELWIKI_SERVER_URL"].startswith("http://service:")
        argv = _argv(SERVICES[name])
        served = {argv[i + 1] for i, a in enumerate(argv) if a == "--target"}
        assert served and served <= targets, f"{name} serves {served}, not all in KERNELWIKI_TARGETS {targets}"


def test_each_gpu_worker_reserves_its_own_nvidia_gpu() -> None:
    seen: set[str] = set()
    for name in WORKERS:
        devices = SERVICES[name]["deploy"]["resources"]["reservations"]["devices"]
        assert len(devices) == 1 and devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"], name
        ids = set(devices[0]["device_ids"])
        assert not ids & seen, f"{name} shares a GPU with another worker"
        seen |= ids


def test_secrets_come_from_the_environment_only() -> None:
    text = (ROOT / "compose.yaml").read_text()
    for line in text.splitlines():
        if re.search(r"(PASSWORD|TOKEN):", line) or "kernelwiki:" in line and "@db" in line:
            assert "${" in line and ":?" in line, f"a secret written into compose.yaml: {line.strip()}"


def test_queue_database_is_created_by_the_postgres_init_script() -> None:
    mounts = SERVICES["db"]["volumes"]
    init = [m for m in mounts if m.endswith("/docker-entrypoint-initdb.d:ro")]
    assert init, "db mounts no init scripts"
    folder = ROOT / init[0].split(":")[0]
    sql = " ".join(p.read_text() for p in folder.glob("*.sql"))
    assert "CREATE DATABASE kernelwiki_queue" in sql
    assert "kernelwiki_queue" in SERVICES["scheduler"]["environment"]["KERNELWIKI_QUEUE_DATABASE_URL"]
