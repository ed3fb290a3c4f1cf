"""`kernelwiki tokens` (the token printed once, only its hash kept) and the daily GPU-seconds quota, on real SQLite."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from app.cli.main import cli
from app.index.db import create_schema, make_engine
from app.settings import Settings
from app.tryrun import quota
from app.tryrun.store import TryResults, iso
from app.tryrun.tokens import Caller, authenticate
from app.tryrun.work.unit import TryIn, build_unit


def test_a_token_is_printed_on_the_last_line_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'index.db'}"
    runner = CliRunner()
    made = runner.invoke(
        cli, ["tokens", "create", "alice", "--compiles-per-hour", "5", "--gpu-seconds-per-day", "120", "--db", db]
    )
    assert made.exit_code == 0, made.output
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("kwt_") and len(token) > 40
    engine = make_engine(db)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM api_token")).mappings().all()
    assert len(rows) == 1 and rows[0]["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(dict(rows[0])) and rows[0]["compiles_per_hour"] == 5 and rows[0]["gpu_seconds_per_day"] == 120
    assert authenticate(engine, token) == Caller("alice", 5, 120)
    twice = runner.invoke(cli, ["tokens", "create", "alice", "--db", db])
    assert twice.exit_code == 1 and "a token named 'alice' exists already" in twice.output
    bad = runner.invoke(cli, ["tokens", "create", "no spaces", "--db", db])
    assert bad.exit_code == 1 and "is not a token name" in bad.output
    listed = runner.invoke(cli, ["tokens", "list", "--db", db])
    assert "alice" in listed.stdout and token not in listed.stdout
    assert runner.invoke(cli, ["tokens", "revoke", "alice", "--db", db]).exit_code == 0
    again = runner.invoke(cli, ["tokens", "revoke", "alice", "--db", db])
    assert again.exit_code == 1 and "no active token named 'alice'" in again.output
    engine.dispose()


def test_the_daily_gpu_quota_counts_reserved_and_used_seconds_and_says_when_enough_is_free(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'index.db'}")
    create_schema(engine)
    settings = Settings(try_gpu_seconds_per_day=60, try_compiles_per_hour=100)
    results = TryResults(engine)
    caller = Caller("gpu-user", None, None)
    now = datetime.now(UTC)
    for n, (hours_ago, seconds) in enumerate([(20, 25.0), (2, 30.0)]):
        unit = build_unit(TryIn(source=f"int main() {{ return {n}; }}\n", lang="cpp", targets=["any"]), 65536, 4, 30)
        claim = results.claim(hashlib.sha256(bytes([n])).hexdigest(), unit, caller, "local", False, seconds)
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE try_result SET created_at = :at WHERE id = :id"),
                {"at": iso(now - timedelta(hours=hours_ago)), "id": claim.row.id},
            )
    with engine.connect() as conn:
        assert quota.check(conn, caller, settings, 5.0, now) is None  # 55 of 60
        refusal = quota.check(conn, caller, settings, 10.0, now)  # 65 > 60: the run 20 h ago must leave the window
        assert refusal is not None and refusal.status == 429
        assert "used 55 of 60 GPU seconds in the last 24 hours and this run may take 10" in refusal.detail
        assert refusal.retry_after_s is not None and abs(refusal.retry_after_s - 4 * 3600) <= 2
        never = quota.check(conn, caller, settings, 90.0, now)
        assert never is not None and never.status == 403 and "more than the 60 GPU seconds per day" in never.detail
        anonymous = quota.check(conn, Caller(None, None, None), settings, 1.0, now)
        assert anonymous is not None and anonymous.status == 403  # anonymous callers never hold a GPU
    engine.dispose()
