"""`/llms.txt` and `/llms-full.txt`, rendered once per data version and kept in memory with a strong ETag.

Rendering `/llms-full.txt` costs every page's Markdown (at 5,000 pages 45-50 s of CPU and 17.6 MB),
so a process renders each document once per *version*: `/llms.txt` per index generation (it lists
pages), `/llms-full.txt` per data version (it also carries each snippet's evidence, so a posted record
changes it). Requests that arrive while a version is being rendered wait for that one rendering
instead of starting their own (app/cache.py's `LRU(wait=True)`).

The base URL comes from the request's `Host`, which any client chooses: a document is rendered once
with a placeholder origin and the request's origin is put in when it is sent, so a new `Host` costs a
byte replacement, never a new rendering, and cannot push the rendered documents out of the cache.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from app.cache import LRU

RENDERED_DOCUMENTS = 4
"""Documents a process keeps: both documents of the current version, and the previous ones while requests that
began before a reindex finish."""

PLACEHOLDER_ORIGIN = f"http://kernelwiki-origin-{secrets.token_hex(8)}.invalid"
"""The origin documents are rendered with (random per process: no page can contain it by design or by chance)."""


@dataclass(frozen=True)
class Rendered:
    """One document of one version, with the placeholder origin where the request's origin goes."""

    body: bytes  # the document, rendered with PLACEHOLDER_ORIGIN
    digest: str  # sha256 of `body` (hex)

    def for_origin(self, origin: str) -> bytes:
        """The document as sent to a client that reached the service at `origin`."""
        return self.body.replace(PLACEHOLDER_ORIGIN.encode(), origin.encode())

    def etag(self, origin: str) -> str:
        """A strong ETag: it changes with the bytes sent, which depend on the rendering and the origin."""
        origin_part = hashlib.sha256(origin.encode()).hexdigest()[:8]
        return f'"{self.digest[:32]}-{origin_part}"'


class RenderedDocuments:
    """The rendered agent documents of one app (`app.state.agent_documents`)."""

    def __init__(self, size: int = RENDERED_DOCUMENTS) -> None:
        self.renderings = 0  # documents rendered by this process (tests and benchmarks read it)
        self._documents: LRU[Rendered] = LRU(size, wait=True)

    def _render(self, render: Callable[[str], str]) -> Rendered:
        body = render(PLACEHOLDER_ORIGIN).encode()
        self.renderings += 1
        return Rendered(body, hashlib.sha256(body).hexdigest())

    def get(self, key: Hashable, render: Callable[[str], str]) -> Rendered:
        """The document for `key` (its name and version), rendered by `render(origin)` when this process has none."""
        return self._documents.get_or_make(key, lambda: self._render(render))


def matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for this header)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))
