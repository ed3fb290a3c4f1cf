"""Settings: the one place configuration is read (environment variables `KERNELWIKI_*`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Service configuration; build one in the CLI or test and pass it down."""

    model_config = SettingsConfigDict(env_prefix="KERNELWIKI_", extra="ignore")

    wiki: Path = Path("wiki")  # folder of Markdown pages
    db: str = "sqlite:///.kernelwiki/index.db"  # SQL index URL (sqlite:/// or postgresql://)
    evidence: Path = Path("evidence")  # folder of committed evidence JSONL, loaded at start
    host: str = "127.0.0.1"
    port: int = 8000
    runner_token: SecretStr | None = None  # required by POST /api/evidence; unset refuses all posts
    index_on_start: bool = True  # reindex the wiki when the app starts
    search_max_query_chars: int = 2000  # longer queries are cut (never an error)
