"""Per-app state of the docs browser: the template environment and small caches.

Everything lives on one `WebState` object that `install_web` puts on
`app.state.web`, so two apps in one process never share a cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request

from app.cache import LRU
from app.web.filters import install_filters

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
STATIC = Path(__file__).resolve().parent.parent / "static"


def make_environment() -> Environment:
    """Jinja2 with autoescaping on for every template (page authors' text is never trusted)."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    install_filters(env)
    return env


@dataclass
class WebState:
    """The docs browser's environment and caches for one app."""

    env: Environment = field(default_factory=make_environment)
    bodies: LRU[Any] = field(default_factory=lambda: LRU(256))  # rendered page bodies
    code: LRU[str] = field(default_factory=lambda: LRU(4096))  # highlighted code blocks
    graphs: LRU[Any] = field(default_factory=lambda: LRU(64, wait=True))  # graph drawings, per generation and neighbourhood
    link_names: LRU[Any] = field(default_factory=lambda: LRU(1024))  # the ids and paths a page body's links name
    links: LRU[Any] = field(default_factory=lambda: LRU(1024))  # which of those are pages, per index generation
    asset_version: str = ""  # appended to asset URLs so browsers refetch after a change
    warmed: threading.Event = field(default_factory=threading.Event)  # set once templates and lexers are compiled
    prerendered: threading.Event = field(default_factory=threading.Event)  # set when background pre-rendering ended
    closing: threading.Event = field(
        default_factory=threading.Event
    )  # set at shutdown: pre-rendering stops, its connection goes back


def web_state(request: Request) -> WebState:
    """The `WebState` of the app serving `request`."""
    return request.app.state.web
