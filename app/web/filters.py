"""Jinja2 filters and tests: readable evidence values, resource tables, times, and safe author URLs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment

from app.web.badges import STATUS_LABEL, describe, rank

SAFE_URL = re.compile(r"^https?://[^\s\"'<>]+$", re.IGNORECASE)
"""A plain http(s) URL: the only kind of author-given link a page shows."""

RESOURCE_COLUMNS = [
    ("name", "function"),
    ("registers", "registers"),
    ("smem_bytes", "smem B"),
    ("stack_frame_bytes", "stack B"),
    ("spill_store_bytes", "spill st B"),
    ("spill_load_bytes", "spill ld B"),
    ("barriers", "barriers"),
]


@dataclass
class Resources:
    totals: list[tuple[str, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    functions: list[list[str]] = field(default_factory=list)


def resources(value: Any) -> Resources:
    """A record's `resources` as a totals list and a per-function table."""
    if not isinstance(value, dict):
        return Resources()
    out = Resources(totals=[(k.replace("_", " "), describe(v)) for k, v in value.items() if k != "functions"])
    funcs = value.get("functions")
    if isinstance(funcs, list) and funcs and all(isinstance(f, dict) for f in funcs):
        cols = [(k, h) for k, h in RESOURCE_COLUMNS if any(k in f for f in funcs)]
        out.columns = [h for _, h in cols]
        out.functions = [[describe(f.get(k, "")) for k, _ in cols] for f in funcs]
    return out


def when(value: Any) -> str:
    """An ISO timestamp as 'YYYY-MM-DD HH:MM UTC' (anything else unchanged)."""
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%d %H:%M UTC")


def host(value: Any) -> str:
    """The host part of a URL, for a short external link text."""
    return urlsplit(str(value)).netloc or str(value)


def safe_url(value: Any) -> str | None:
    """An author-given URL when it is plain http(s), else None (never a `javascript:` link)."""
    return value if isinstance(value, str) and SAFE_URL.match(value.strip()) else None


def install_filters(env: Environment) -> None:
    """Register the filters, tests and globals the templates use."""
    env.filters["host"] = host
    env.filters["by_status"] = lambda counts: sorted(counts.items(), key=lambda kv: rank(kv[0]))
    env.tests["match_http"] = lambda value: safe_url(value) is not None
    env.filters["describe"] = describe
    env.filters["resources"] = resources
    env.filters["when"] = when
    env.globals["status_label"] = STATUS_LABEL
