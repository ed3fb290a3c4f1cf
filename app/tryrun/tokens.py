"""API tokens of people and agents: made and revoked with `kernelwiki tokens`, kept only as sha256 hashes.

A token is `kwt_` and 43 URL-safe characters (256 random bits). The database keeps its sha256; a request's
token is hashed and compared with `hmac.compare_digest` against the stored hash found by that hash. The runner
token (`KERNELWIKI_RUNNER_TOKEN`, which lets GPU workers post evidence) is a different thing and never accepted
here, and no API token can post evidence. Reading the wiki needs no token.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from app.index.models import TokenRow

PREFIX = "kwt_"
"""Every API token starts with this, so a leaked one is recognisable (and never mistaken for the runner token)."""

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
"""What a token's name may be: a person's or an agent's handle."""


class TokenError(ValueError):
    """A token cannot be made or revoked as asked; the message says why."""


@dataclass(frozen=True)
class Caller:
    """Who asks for a try run: a token's name and quotas, or an anonymous caller (name None)."""

    name: str | None  # the token's name; None: anonymous
    compiles_per_hour: int | None  # the token's own quota (None: the server's default)
    gpu_seconds_per_day: int | None

    @property
    def anonymous(self) -> bool:
        return self.name is None


ANONYMOUS = Caller(None, None, None)


def now_iso() -> str:
    """UTC now, fixed width (microseconds), so that text order is time order."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(engine: Engine, name: str, compiles_per_hour: int | None = None, gpu_seconds_per_day: int | None = None) -> str:
    """Make a token for `name` and return it (the only time it is seen); TokenError for a bad or taken name."""
    if not NAME.fullmatch(name):
        raise TokenError(
            f"'{name}' is not a token name: letters, digits and _ . @ - (at most 64), starting with a letter or digit"
        )
    for value, what in ((compiles_per_hour, "--compiles-per-hour"), (gpu_seconds_per_day, "--gpu-seconds-per-day")):
        if value is not None and value < 0:
            raise TokenError(f"{what} must be 0 or more, not {value}")
    token = PREFIX + secrets.token_urlsafe(32)
    row = TokenRow(
        name=name,
        token_hash=hash_token(token),
        compiles_per_hour=compiles_per_hour,
        gpu_seconds_per_day=gpu_seconds_per_day,
        created_at=now_iso(),
    )
    try:
        with engine.begin() as conn:
            conn.execute(insert(TokenRow).values(**row.model_dump()))
    except IntegrityError:
        raise TokenError(f"a token named '{name}' exists already (revoke it, or pick another name)") from None
    return token


def revoke_token(engine: Engine, name: str) -> bool:
    """Revoke `name`'s token; False when there is no such token or it was revoked already."""
    with engine.begin() as conn:
        done = conn.execute(
            update(TokenRow).where(col(TokenRow.name) == name, col(TokenRow.revoked_at).is_(None)).values(revoked_at=now_iso())
        )
    return bool(done.rowcount)


def list_tokens(engine: Engine) -> list[TokenRow]:
    """Every token, newest first (hashes included; never the tokens themselves, which are not kept)."""
    with engine.connect() as conn:
        rows = conn.execute(select(TokenRow).order_by(col(TokenRow.created_at).desc())).all()
    return [TokenRow.model_validate(r._mapping) for r in rows]


class Refused(Exception):
    """A token that cannot be used: `status` 401 (unknown) or 403 (revoked), `detail` says which."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def authenticate(engine: Engine, token: str) -> Caller:
    """The caller a bearer token stands for, or Refused (401 unknown, 403 revoked)."""
    if not token.startswith(PREFIX) or len(token) > 200:
        raise Refused(401, "Authorization: not a kernelwiki API token (they start with kwt_; `kernelwiki tokens create NAME`)")
    digest = hash_token(token)
    with engine.connect() as conn:
        row = conn.execute(select(TokenRow).where(col(TokenRow.token_hash) == digest)).first()
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise Refused(401, "Authorization: unknown API token")
    if row.revoked_at is not None:
        raise Refused(403, f"Authorization: the token '{row.name}' was revoked at {row.revoked_at}")
    return Caller(row.name, row.compiles_per_hour, row.gpu_seconds_per_day)
