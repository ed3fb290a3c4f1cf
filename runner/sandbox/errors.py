"""The sandbox's errors (raised before anything runs; a command's own failure is never an exception)."""

from __future__ import annotations


class SandboxUnavailable(RuntimeError):
    """The isolation asked for cannot be used on this machine (or no sandbox slot is free); nothing was run."""
