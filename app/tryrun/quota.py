"""Quotas of try runs: per token, runs started per hour and GPU seconds per day, over sliding windows.

What they protect: one GPU node shared by a team, whose nightly verification must never wait on try runs
(that is the queue's priority, app/tryrun/work/jobs.py) and whose compilers and GPU a single token must not hold
all day. A run answered from the stored results costs nothing. A refusal says when the quota refills: the
moment enough of the window's runs fall out of it.

Counted from the `try_result` rows themselves (who asked first, when, how many GPU seconds it reserved and
then used), so every service process and replica sees the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.index.models import TryResultRow
from app.settings import Settings
from app.tryrun.store import iso, parse_iso
from app.tryrun.tokens import Caller

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@dataclass
class Refusal:
    """A quota that does not allow the run: 429 with Retry-After when it refills, 403 when it never can."""

    status: int  # 429 (wait) or 403 (this run can never fit the quota)
    detail: str  # which quota, how much is used, and when it refills
    retry_after_s: int | None = None  # seconds until it refills (429 only)


def compiles_allowed(caller: Caller, settings: Settings) -> int:
    if caller.anonymous:
        return settings.try_anonymous_compiles_per_hour
    return settings.try_compiles_per_hour if caller.compiles_per_hour is None else caller.compiles_per_hour


def gpu_seconds_allowed(caller: Caller, settings: Settings) -> int:
    if caller.anonymous:
        return 0  # anonymous callers never run programs
    return settings.try_gpu_seconds_per_day if caller.gpu_seconds_per_day is None else caller.gpu_seconds_per_day


def _who(caller: Caller) -> str:
    return "anonymous callers" if caller.anonymous else f"token '{caller.name}'"


def _rows(conn: Connection, caller: Caller, since: datetime) -> list[tuple[str, float]]:
    """(created_at, gpu_seconds) of the caller's runs since `since`, oldest first."""
    owner = col(TryResultRow.token_name).is_(None) if caller.anonymous else col(TryResultRow.token_name) == caller.name
    stmt = (
        select(col(TryResultRow.created_at), col(TryResultRow.gpu_seconds))
        .where(owner, col(TryResultRow.created_at) >= iso(since))
        .order_by(col(TryResultRow.created_at))
    )
    return [(str(a), float(b or 0)) for a, b in conn.execute(stmt)]


def _refill(at: datetime, now: datetime) -> tuple[str, int]:
    seconds = max(1, math.ceil((at - now).total_seconds()))
    return at.strftime("%Y-%m-%dT%H:%M:%SZ"), seconds


def check(
    conn: Connection, caller: Caller, settings: Settings, gpu_seconds: float, now: datetime | None = None
) -> Refusal | None:
    """None when `caller` may start one more run that may hold a GPU for `gpu_seconds`; else why not."""
    now = now or datetime.now(UTC)
    allowed = compiles_allowed(caller, settings)
    if allowed <= 0:
        return Refusal(403, f"{_who(caller)} may not start try runs: the quota is 0 runs per hour")
    hour = _rows(conn, caller, now - HOUR)
    if len(hour) >= allowed:
        frees = parse_iso(hour[len(hour) - allowed][0]) + HOUR
        when, seconds = _refill(frees, now)
        return Refusal(
            429,
            f"quota: {_who(caller)} started {len(hour)} try runs in the last hour, the most allowed is {allowed}; "
            f"the next one is allowed at {when} (in {seconds} s)",
            seconds,
        )
    if gpu_seconds <= 0:
        return None
    budget = gpu_seconds_allowed(caller, settings)
    if gpu_seconds > budget:
        return Refusal(
            403,
            f"quota: this run may hold a GPU for {gpu_seconds:g} s (its timeout × targets), more than the "
            f"{budget} GPU seconds per day of {_who(caller)}",
        )
    day = _rows(conn, caller, now - DAY)
    used = sum(s for _, s in day)
    if used + gpu_seconds <= budget:
        return None
    need, freed = used + gpu_seconds - budget, 0.0
    for created, held in day:
        freed += held
        if freed >= need:
            when, wait = _refill(parse_iso(created) + DAY, now)
            break
    else:  # pragma: no cover - the run fits the budget alone, so the window's expiry always frees enough
        when, wait = _refill(now + DAY, now)
    return Refusal(
        429,
        f"quota: {_who(caller)} used {used:g} of {budget} GPU seconds in the last 24 hours and this run may take "
        f"{gpu_seconds:g}; enough is free again at {when} (in {wait} s)",
        wait,
    )
