"""SQL tables of the index (SQLModel). The API returns the `*Public` models in app/schemas.py."""

from __future__ import annotations

from sqlalchemy import BigInteger, FromClause, Index, inspect
from sqlmodel import Field, SQLModel


class PageRow(SQLModel, table=True):
    """One indexed page; list fields live in their own tables, the raw front matter in `meta`."""

    __tablename__ = "page"
    __table_args__ = (
        Index("ix_page_listing", "type", "title", "id"),  # listings page in this order (0006)
        Index("ix_page_summary", "id", "type", "title", "description"),  # /llms.txt reads these alone (0014v)
    )
    id: str = Field(primary_key=True)
    id_lower: str | None = Field(default=None, index=True)  # for case-insensitive resolution by id (0016)
    title: str
    title_lower: str = Field(index=True)  # for case-insensitive resolution by title
    type: str = Field(index=True)
    path: str = Field(index=True)
    confidence: str | None = Field(default=None, index=True)
    evidence_level: str | None = None
    meta: str  # JSON of every front-matter field (unknown keys included)
    body: str  # Markdown body
    body_line: int  # file line of the body's first line
    toc: str  # JSON list of {level, heading, anchor}
    content_hash: str
    description: str | None = None  # app.index.markdown.description of the body, for llms.txt (0010); None: indexed before it


class FileRow(SQLModel, table=True):
    """One Markdown file seen under the wiki root, for incremental reindexing."""

    __tablename__ = "file"
    path: str = Field(primary_key=True)
    mtime_ns: int = Field(sa_type=BigInteger)  # nanoseconds outgrow a 32-bit INTEGER (PostgreSQL)
    size: int = Field(sa_type=BigInteger)
    content_hash: str
    page_id: str | None = Field(default=None, index=True)  # None when the file has errors


class DiagnosticRow(SQLModel, table=True):
    """A problem found while indexing a file (`path:line: severity: message`)."""

    __tablename__ = "diagnostic"
    id: int | None = Field(default=None, primary_key=True)
    path: str = Field(index=True)
    line: int
    severity: str
    message: str


class AliasRow(SQLModel, table=True):
    __tablename__ = "alias"
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    alias: str
    alias_lower: str = Field(index=True)
    rank: int = 0  # how the page holds it: snippets.repository ALIAS_OWN, ALIAS_NAMED, ALIAS_BY_ID (0015)


class TagRow(SQLModel, table=True):
    __tablename__ = "tag"
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    tag: str = Field(index=True)


class LanguageRow(SQLModel, table=True):
    __tablename__ = "language"
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    language: str = Field(index=True)


class ArchitectureRow(SQLModel, table=True):
    """A declared architecture and its family (`sm90a` → `sm90`), for `arch=` filters."""

    __tablename__ = "architecture"
    __table_args__ = (Index("ix_architecture_family_page", "family", "page_id"),)  # the arch facet (0006)
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    arch: str
    family: str = Field(index=True)


class FacetRow(SQLModel, table=True):
    """A value of a list field a repository's pages classify themselves by: techniques, hardware_features, kernel_types,
    symptoms, candidate_techniques, a PR's repo (app/index/facets.py names them). Feeds the facets and the queries/ views."""

    __tablename__ = "facet"
    __table_args__ = (Index("ix_facet_name_value", "facet", "value", "page_id"),)  # (0007)
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    facet: str  # the front-matter field
    value: str


class PerformanceClaimRow(SQLModel, table=True):
    """One item of a page's `performance_claims` (app/index/perf.py reads them; d25measure binds them to measurements)."""

    __tablename__ = "performance_claim"
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    position: int  # 1-based order on the page
    gpu: str | None = Field(default=None, index=True)
    dtype: str | None = None
    shape: str | None = None
    metric: str | None = Field(default=None, index=True)
    value: float | None = None  # None when the page wrote something that is not a number (kept in `data`)
    utilization: str | None = None
    source_id: str | None = None
    source_locator: str | None = None
    data: str  # JSON of the item as written (fields d25measure adds, e.g. measured_by, tolerance)


class LinkRow(SQLModel, table=True):
    """A `related` or `sources` link; `resolved` says whether the target page exists."""

    __tablename__ = "link"
    id: int | None = Field(default=None, primary_key=True)
    source_id: str = Field(index=True)
    target_id: str = Field(index=True)
    kind: str  # "related" or "sources"
    resolved: bool = False


class SectionRow(SQLModel, table=True):
    """One heading of a page with its anchor and text; search answers with a section."""

    __tablename__ = "section"
    id: int | None = Field(default=None, primary_key=True)
    page_id: str = Field(index=True)
    position: int
    level: int
    heading: str
    anchor: str
    line: int
    text: str


class SnippetRow(SQLModel, table=True):
    """A verifiable code block of a page (see docs/snippets.md)."""

    __tablename__ = "snippet"
    id: str = Field(primary_key=True)  # PAGE_ID:N
    page_id: str = Field(index=True)
    position: int  # N
    line: int  # file line of the opening fence
    lang: str = Field(index=True)
    mode: str
    targets: str  # JSON list, e.g. ["sm_90a", "sm_100a"]
    content_hash: str = Field(index=True)
    data: str  # JSON of the snippet (info, attributes, visible source)
    status: str | None = Field(
        default=None, index=True
    )  # runner/status.py's verdict on its evidence (0009); None: not yet judged


class SnippetTargetRow(SQLModel, table=True):
    """One snippet × target line of the evidence dashboard with its status, kept with `SnippetRow.status` (0009).

    Written where the status is (app/evidence/store.py `EvidenceStore.refresh_statuses`: at evidence ingest and at
    reindex), so listings filter, count and page it in SQL. A sketch, fragment or invalid block has one line, target `—`.
    """

    __tablename__ = "snippet_target"
    __table_args__ = (
        Index("ix_snippet_target_listing", "status_rank", "page_id", "position", "target_order", "target"),
    )  # the dashboard's order: worst first, then page, position, target (sm_90a before sm_100a)
    id: int | None = Field(default=None, primary_key=True)
    snippet_id: str = Field(index=True)
    page_id: str = Field(index=True)
    position: int
    target: str = Field(index=True)
    target_order: int  # the number in the target's name (sm_100a → 100), so sm_90a sorts before sm_100a
    status: str
    status_rank: int  # runner.status.rank(status): worst first


class EvidenceRow(SQLModel, table=True):
    """One verification record (snippet × target × step); the full record is in `data`."""

    __tablename__ = "evidence"
    __table_args__ = (
        Index("ix_evidence_history", "snippet_id", "timestamp", "record_id"),
    )  # a snippet's history, newest first (0008)
    record_id: str = Field(primary_key=True)
    snippet_id: str = Field(index=True)
    page_id: str = Field(index=True)
    target: str = Field(index=True)
    step: str
    status: str = Field(index=True)
    content_hash: str
    timestamp: str = Field(index=True)  # the record's time, UTC, fixed width (app/evidence/ingest.py): text order is time order
    data: str
    received_at: str | None = None  # when the service stored it, same form; None for records from before 0004
    origin: str | None = Field(default=None, index=True)  # "request" (POST /api/evidence), "verify", or the JSONL file
    toolchain_release: str | None = None  # an explicitly chosen CUDA release (verify --toolchain 13.1) (0012); None: the default


class RunGpuRow(SQLModel, table=True):
    """A GPU that ran a program which passed, per architecture family (0015; app/index/run_gpus.py): what the home
    page and /llms.txt say ran where, kept as records are stored so that no request scans the evidence."""

    __tablename__ = "run_gpu"
    family: str = Field(primary_key=True)  # "Hopper", "Blackwell", … (app/index/run_gpus.py family_of)
    gpu_name: str = Field(primary_key=True)  # as the record names it: "NVIDIA H200"


class MatrixCellRow(SQLModel, table=True):
    """One cell of the toolchain × target matrix (runner/matrix.py `MatrixCell`): a snippet × target × CUDA release (0012).

    Loaded from the committed `evidence/matrix/cells.jsonl` (app/evidence/matrix_sql.py, at index and start) and
    posted by queue workers' matrix jobs (`POST /api/matrix/cells`); the views and the API read them here. The
    newest observation of a snippet × target × release is kept.
    """

    __tablename__ = "matrix_cell"
    snippet_id: str = Field(primary_key=True)  # PAGE_ID:N
    target: str = Field(primary_key=True)  # e.g. sm_90a
    release: str = Field(primary_key=True)  # CUDA release of the toolchain, e.g. 13.1
    page_id: str = Field(index=True)
    toolchain: str  # e.g. nvcc 13.1.115
    fingerprint: str | None = None  # the toolchain's identity (installed wheel set) when a queue worker observed it
    content_hash: str  # the snippet content the cell was observed for
    mode: str
    lang: str
    status: str
    message: str
    registers: int | None = None
    smem_bytes: int | None = None
    spill_bytes: int | None = None
    warnings: str  # JSON list
    sass_check: str | None = None
    resources: str  # JSON object: the full ptxas report
    sass: str | None = None  # sha256 of the kept SASS (evidence/artifacts)
    ptx: str | None = None
    note: str
    timestamp: str  # when observed (as the runner wrote it)
    origin: str  # "file" (cells.jsonl) or "request" (a queue worker's post)


class StateRow(SQLModel, table=True):
    """Index-wide values; `generation` grows with every reindex that changed something."""

    __tablename__ = "index_state"
    key: str = Field(primary_key=True)
    value: int


# -- try runs (issue 27, app/tryrun/): API tokens and try results, never page evidence (migration 0009) --


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
    result: str | None = None  # JSON of the finished record (app/tryrun/work/execute.py: result_record)


def table_of(model: type[SQLModel]) -> FromClause:
    """The SQL table a row model maps, for Core statements (`table_of(PageRow).select()`: every column, as rows).

    The same object as the class's `__table__`, which SQLModel's type hints do not declare.
    """
    return inspect(model).local_table
