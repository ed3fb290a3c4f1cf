"""SQL tables of try runs: API tokens and try results (migration 0009). Never page evidence."""

from __future__ import annotations

from sqlalchemy import Index
from sqlmodel import Field, SQLModel


class TokenRow(SQLModel, table=True):
    """An API token of a person or an agent: only its sha256 is kept (the token is shown once, at creation)."""

    __tablename__ = "api_token"
    name: str = Field(primary_key=True)  # who it is for, e.g. "alice" or "ci-agent"
    token_hash: str = Field(unique=True)  # sha256 hex of the token
    compiles_per_hour: int | None = None  # None: the server's default (Settings.try_compiles_per_hour)
    gpu_seconds_per_day: int | None = None  # None: the server's default (Settings.try_gpu_seconds_per_day)
    created_at: str  # ISO 8601 UTC
    revoked_at: str | None = None  # set by `kernelwiki tokens revoke`; a revoked token is refused (403)


class TryResultRow(SQLModel, table=True):
    """One try run, keyed by its content (source, language, attributes, targets, toolchain): asked again, it answers
    from here. `events` is the progress so far (queued → compiling → running → done); `result` the finished record."""

    __tablename__ = "try_result"
    __table_args__ = (Index("ix_try_result_quota", "token_name", "created_at"),)  # a token's recent runs (quotas)
    id: str = Field(primary_key=True)  # the share id: /try/{id}, /api/try/{id}
    key: str = Field(unique=True)  # sha256 of everything the result depends on
    state: str  # queued | compiling | running | done
    status: str | None = None  # when done: the worst step status (pass, fail, error, …)
    final: bool = True  # False when an infrastructure fault ended it: the same content asked again runs again
    token_name: str | None = None  # who asked first (None: an anonymous caller)
    snippet_id: str | None = None  # the page snippet the source started from, if any
    lang: str
    targets: str  # JSON list, e.g. ["sm_90a"]
    attributes: str  # the fence attributes as an info string (after the language word)
    source: str
    executor: str  # local (the service's own pool) | queue (a GPU worker of the job queue)
    compile_only: bool = False  # nothing was to be run (no GPU, an anonymous caller, or not a program)
    gpu_seconds: float = 0.0  # wall-clock seconds of its run steps (counted against the token's daily GPU time)
    created_at: str  # ISO 8601 UTC, fixed width: text order is time order
    updated_at: str
    finished_at: str | None = None
    events: str = "[]"  # JSON list of {"event", "at", …}
    result: str | None = None  # JSON of the finished record (app/tryrun/record.py)
