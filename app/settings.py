"""Settings: the one place configuration is read (environment variables `KERNELWIKI_*`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Service configuration; build one in the CLI or test and pass it down."""

    model_config = SettingsConfigDict(env_prefix="KERNELWIKI_", extra="ignore")

    wiki: Path = Path("wiki")  # folder of Markdown pages
    db: str = "sqlite:///.kernelwiki/index.db"  # SQL index URL (sqlite:/// or postgresql://)
    evidence: Path = Path("evidence")  # folder of committed evidence JSONL, loaded at start
    host: str = "127.0.0.1"
    port: int = 8000
    access_log: bool = True  # one log line per request from `kernelwiki serve`; the search benchmark turns it off
    runner_token: SecretStr | None = None  # required by POST /api/evidence; unset refuses all posts
    index_on_start: bool = True  # reindex the wiki when the app starts
    search_max_query_chars: int = 2000  # longer queries are cut (never an error)
    search_cache_size: int = 1024  # search answers kept per process, keyed by query, filters, paging and index generation; 0 turns the cache off (benchmarks of uncached search)
    search_refresh_s: float = 1.0  # how often a serving process asks the database whether another process reindexed (its own reindexes show at once); 0 = on every search
    search_dir: Path | None = (
        None  # the host's on-disk full-text index (generation folders, shared by every serving process); unset: beside an SQLite file (`<file>.search`), or .kernelwiki/search/<host>-<port>-<database> for PostgreSQL
    )
    search_typo_budget_s: float = (
        0.04  # most time a query with no hits spends correcting typos (then it answers with what it has)
    )
    query_echo_chars: int = 200  # the HTML search page shows at most this much of a query (the rest as "…")
    evidence_max_body_bytes: int = 8 * 1024 * 1024  # POST /api/evidence bodies above this are refused (413) while they stream in
    watch: bool = False  # reindex the wiki as its files change (`kernelwiki serve --watch`)
    read_only: bool = False  # an extra worker of `serve --workers N`: opens the index read-only and never indexes
    shutdown_timeout_s: float = (
        3.0  # on SIGINT/SIGTERM, requests still running after this are cancelled (the process exits within ~1 s more)
    )
    db_pool_size: int = 8  # SQL connections kept open; each request holds exactly one
    db_max_overflow: int = 40  # extra connections under load (size + overflow ≥ 40 request threads: nobody waits)
    db_pool_timeout_s: float = 30.0  # how long a request waits for a connection before failing

    # -- scale-out: the PostgreSQL job queue and GPU workers (docs/deploy.md) --
    queue_database_url: SecretStr | None = None  # PostgreSQL URL of the job queue; unset: `db` when that is PostgreSQL
    server_url: str = "http://127.0.0.1:8000"  # the service that workers post evidence to (POST /api/evidence)
    targets: list[str] = [
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_100a",
        "sm_103a",
    ]  # targets the fleet verifies, one queue each (JSON list in env)
    sweep_cron: str = "* * * * *"  # how often the scheduler queues edited snippets (cron, UTC; 6th field: seconds)
    nightly_cron: str = "0 3 * * *"  # when the scheduler fans out every snippet × target (cron, UTC)
    nightly_force: bool = False  # nightly redoes what is verified already with the same hash and toolchain
    job_attempts: int = 3  # a job is retried until it has been tried this many times more
    job_retry_wait_s: int = 30  # a failed job waits attempts × this many seconds before its retry
    stalled_after_s: float = 60.0  # a running job whose worker sent no heartbeat for this long is retried
    worker_heartbeat_s: float = 10.0  # how often a worker says it is alive (keep well below stalled_after_s)
    worker_cache: Path = Path(".kernelwiki/cache")  # a worker's runner result cache
    toolchain: str | None = None  # a worker's CUDA release from `kernelwiki toolchains install` (None: the nvcc on PATH)
    matrix_releases: list[str] = []  # CUDA releases the nightly matrix fans out to, one queue each (JSON list in env;
    # empty: the releases the index's matrix has cells of)
    isolation: str | None = (
        None  # sandbox of compiles and runs: bwrap (None: the default), unshare-net, none, auto (docs/sandbox.md)
    )
    worker_http_timeout_s: float = 60.0  # limit of each request a worker makes to the service
    queue_synchronous_commit: bool = (
        False  # queue writes wait for the disk (off is safe: every queue write is redone idempotently)
    )

    # -- try runs: edit a snippet and run it (issue 27, docs/try.md) --
    try_enabled: bool = Field(
        default=False, validation_alias=AliasChoices("try_enabled", "KERNELWIKI_TRY")
    )  # POST /api/try and the editor are off unless `serve --try` or KERNELWIKI_TRY=1
    try_anonymous: bool = False  # callers without a token may compile (never run), from one shared hourly quota
    try_compiles_per_hour: int = 30  # a token's default: try runs started (not answered from the store) per hour
    try_gpu_seconds_per_day: int = 600  # a token's default: seconds of its programs on the GPU per 24 hours
    try_anonymous_compiles_per_hour: int = 20  # all anonymous callers together, when try_anonymous allows them
    try_max_source_bytes: int = 64 * 1024  # a longer source is refused (422)
    try_max_targets: int = 4  # targets one try run may name
    try_max_timeout_s: int = 30  # the most a try run's `timeout=` may ask for (runs hold the GPU that long at most)
    try_pool_workers: int = 1  # local pool (no job queue): try runs built at once
    try_pool_queue: int = 8  # local pool: try runs waiting; beyond it a request is refused (429) until one ends
    try_executor: Literal["auto", "local", "queue"] = (
        "auto"  # local (the service's pool), queue (GPU workers), auto: queue where the index is PostgreSQL
    )
    try_dir: Path = Path(".kernelwiki/try")  # the local pool's runner cache and kept SASS/PTX (never the nightly cache)
