"""The toolchain × target matrix in SQL (`matrix_cell`, migration 0012): loading, storing and reading cells.

Cells come from two places: the committed `EVIDENCE/matrix/cells.jsonl` that `kernelwiki matrix`
writes (loaded with the evidence folder: `kernelwiki index`, the service's start), and queue
workers' matrix jobs (`POST /api/matrix/cells`, app/api/matrix_jobs.py). One row per snippet ×
target × release; of two observations of the same cell the newer one is kept (a tie: the one
stored last). A file cell that left the file (its snippet was removed, `kernelwiki matrix`
rewrote the file) leaves the table; a posted cell stays until a newer observation replaces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import delete, insert, select, tuple_, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from app.evidence.ingest import MAX_WARNINGS, MESSAGE_MAX_BYTES, Id, Short, _json_bounded, _rfc3339
from app.index.db import bulk_insert, chunks, serialize_status_writers
from app.index.models import MatrixCellRow, SnippetRow, StateRow, table_of
from runner.artifacts import MAX_LISTING_BYTES, MAX_SNIPPET_BYTES, ArtifactStore
from runner.matrix import UNSUPPORTED, MatrixCell, read_cells, write_cells
from runner.output import cap_text
from runner.status import RECORD_STATUSES
from runner.toolchains import release_key

MATRIX_FILE = "matrix/cells.jsonl"
"""Where runner/matrix.py's cells are kept under the evidence folder (a subfolder: the evidence import reads only *.jsonl at the top)."""

FILE_ORIGIN = "file"
REQUEST_ORIGIN = "request"

_JSON_COLUMNS = ("warnings", "resources")


def to_row(cell: MatrixCell, origin: str, fingerprint: str | None = None) -> dict[str, Any]:
    """A cell as a `matrix_cell` row."""
    row = cell.to_dict()
    for name in _JSON_COLUMNS:
        row[name] = json.dumps(row[name], sort_keys=True)
    row["fingerprint"] = fingerprint
    row["origin"] = origin
    return row


def from_row(data: dict[str, Any]) -> MatrixCell:
    """A `matrix_cell` row (as a dict) as the runner's cell (the same object `read_cells` gives for the file)."""
    for name in _JSON_COLUMNS:
        data[name] = json.loads(data[name] or ("[]" if name == "warnings" else "{}"))
    return MatrixCell.from_dict(data)


def _cells(conn: Connection, stmt: Any) -> list[MatrixCell]:
    result = conn.execute(stmt)
    keys = list(result.keys())
    return [from_row(dict(zip(keys, row, strict=True))) for row in result]


def snippet_cells(conn: Connection, snippet_id: str) -> list[MatrixCell]:
    """One snippet's cells, by target then release (oldest first)."""
    table = table_of(MatrixCellRow)
    return sorted(_cells(conn, table.select().where(table.c.snippet_id == snippet_id)), key=lambda c: (c.target, release_key(c.release)))


def all_cells(conn: Connection, page_id: str | None = None) -> list[MatrixCell]:
    """Every cell (of one page when given), in the order of the committed file."""
    table = table_of(MatrixCellRow)
    stmt = table.select()
    if page_id is not None:
        stmt = stmt.where(table.c.page_id == page_id)
    return sorted(_cells(conn, stmt), key=lambda c: (c.page_id, c.snippet_id, c.target, release_key(c.release)))


def export_cells(engine: Engine, path: Path) -> int:
    """Write every cell of the index (the committed file's and queue workers' posts, the newer of each) to `path`
    in the committed file's format (runner/matrix.py `write_cells`); returns how many.

    Written over `EVIDENCE/matrix/cells.jsonl`, it keeps what nightly workers posted with the repository
    (their listings are in the service's evidence artifacts already); loading it again changes nothing (a
    posted cell keeps its toolchain fingerprint, which the nightly enqueue reads).
    """
    with engine.connect() as conn:
        return write_cells(path, all_cells(conn))


def releases(conn: Connection) -> list[str]:
    """The CUDA releases the matrix has cells of, oldest first."""
    table = table_of(MatrixCellRow)
    return sorted((r for (r,) in conn.execute(select(table.c.release).distinct())), key=release_key)


GENERATION_KEY = "matrix_generation"
"""`index_state` key of a number that grows whenever `matrix_cell` changes: readers cache the cells until it moves."""


def generation(conn: Connection) -> int:
    """The matrix generation (0 before any cell was stored)."""
    value = conn.execute(select(col(StateRow.value)).where(col(StateRow.key) == GENERATION_KEY)).scalar()
    return int(value or 0)


def _bump(conn: Connection) -> None:
    current = conn.execute(select(col(StateRow.value)).where(col(StateRow.key) == GENERATION_KEY)).scalar()
    if current is None:
        conn.execute(insert(StateRow).values(key=GENERATION_KEY, value=1))
    else:
        conn.execute(update(StateRow).where(col(StateRow.key) == GENERATION_KEY).values(value=(current + 1) % (1 << 31)))


Key = tuple[str, str, str]


def _key(cell: MatrixCell) -> Key:
    return (cell.snippet_id, cell.target, cell.release)


@dataclass
class CellsStored:
    """What storing cells did."""

    inserted: int = 0  # new snippet × target × release
    replaced: int = 0  # an older observation replaced
    kept: int = 0  # unchanged, or an equally new or newer observation was there already
    removed: int = 0  # file cells no longer in the file
    errors: list[str] = field(default_factory=list)


_NOT_OBSERVED = ("id", "origin", "fingerprint")
"""Columns of a stored cell that say where it came from, not what was observed: the same observation from the
committed file and from a worker's post is one observation (the post's fingerprint is kept)."""


def _observed(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in _NOT_OBSERVED}, sort_keys=True)


def _existing(conn: Connection, keys: list[Key]) -> dict[Key, tuple[str, str, str]]:
    """(timestamp, origin, what was observed as JSON) of the stored cells among `keys`."""
    table = table_of(MatrixCellRow)
    found: dict[Key, tuple[str, str, str]] = {}
    for chunk in chunks(sorted(keys), 300):
        stmt = table.select().where(tuple_(table.c.snippet_id, table.c.target, table.c.release).in_(chunk))
        for r in conn.execute(stmt):
            m = dict(r._mapping)
            found[(m["snippet_id"], m["target"], m["release"])] = (m["timestamp"], m["origin"], _observed(m))
    return found


def store_cells(
    conn: Connection, cells: list[MatrixCell], origin: str, fingerprint: str | None = None, existing: Any = None
) -> CellsStored:
    """Write cells in the caller's transaction; a stored cell is replaced only by one observed no earlier."""
    result = CellsStored()
    latest: dict[Key, MatrixCell] = {}
    for c in cells:
        if _key(c) not in latest or c.timestamp >= latest[_key(c)].timestamp:
            latest[_key(c)] = c
    have = existing if existing is not None else _existing(conn, list(latest))
    rows: list[dict[str, Any]] = []
    replace: list[Key] = []
    for key, cell in latest.items():
        row = to_row(cell, origin, fingerprint)
        old = have.get(key)
        if old is None:
            result.inserted += 1
        elif cell.timestamp < old[0] or _observed(row) == old[2]:
            result.kept += 1
            continue
        else:
            result.replaced += 1
            replace.append(key)
        rows.append(row)
    table = table_of(MatrixCellRow)
    for chunk in chunks(replace, 300):
        conn.execute(delete(MatrixCellRow).where(tuple_(table.c.snippet_id, table.c.target, table.c.release).in_(chunk)))
    bulk_insert(conn, MatrixCellRow, rows)
    if rows:
        _bump(conn)
    return result


def load_matrix_file(engine: Engine, evidence_dir: Path) -> CellsStored:
    """Bring `matrix_cell` up to date with `EVIDENCE/matrix/cells.jsonl` (nothing happens without the file).

    A bad line is reported as `file:line: error: …` and nothing of the file is loaded (the runner writes it whole).
    """
    path = Path(evidence_dir) / MATRIX_FILE
    if not path.is_file():
        return CellsStored()
    try:
        cells = read_cells(path)
    except (OSError, UnicodeDecodeError) as exc:
        return CellsStored(errors=[f"{path}:1: error: cannot read the matrix: {exc}"])
    except ValueError as exc:  # read_cells names the file and line
        message = str(exc)
        where, _, why = message.partition(": ")
        return CellsStored(errors=[f"{where}: error: {why}"])
    table = table_of(MatrixCellRow)
    with engine.begin() as conn:
        stored = {
            (m["snippet_id"], m["target"], m["release"]): (m["timestamp"], m["origin"], _observed(m))
            for m in (dict(r._mapping) for r in conn.execute(table.select()))
        }
        result = store_cells(conn, cells, FILE_ORIGIN, existing=stored)
        present = {_key(c) for c in cells}
        gone = [k for k, (_, origin, _) in stored.items() if origin == FILE_ORIGIN and k not in present]
        for chunk in chunks(gone, 300):
            conn.execute(delete(MatrixCellRow).where(tuple_(table.c.snippet_id, table.c.target, table.c.release).in_(chunk)))
        result.removed = len(gone)
        if gone:
            _bump(conn)
    return result


# -- cells posted by queue workers (POST /api/matrix/cells) ------------------------

MAX_CELLS_PER_POST = 200
"""A matrix job posts the cells of one snippet × target × release; a post may carry a few hundred."""
CELL_STATUSES = (*RECORD_STATUSES, UNSUPPORTED)
Sha = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class CellIn(BaseModel):
    """One matrix cell as a worker posts it (runner/matrix.py `MatrixCell`); every field bounded, unknown keys dropped."""

    model_config = ConfigDict(extra="ignore")

    snippet_id: Id
    page_id: Id
    target: Annotated[str, Field(min_length=1, max_length=32)]
    release: Annotated[str, Field(pattern=r"^\d{2}\.\d{1,2}$", description="CUDA release, e.g. 13.1")]
    toolchain: Short
    content_hash: Annotated[str, Field(min_length=1, max_length=128)]
    mode: Annotated[str, Field(max_length=32)]
    lang: Annotated[str, Field(max_length=32)]
    status: str = Field(description=f"one of {', '.join(CELL_STATUSES)}")
    message: str = ""
    registers: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    smem_bytes: Annotated[int, Field(ge=0, le=1 << 40)] | None = None
    spill_bytes: Annotated[int, Field(ge=0, le=1 << 40)] | None = None
    warnings: Annotated[list[Annotated[str, Field(max_length=MESSAGE_MAX_BYTES)]], Field(max_length=MAX_WARNINGS)] = Field(
        default_factory=list
    )
    sass_check: Annotated[str, Field(max_length=32)] | None = None
    resources: Annotated[dict[str, Any], BeforeValidator(_json_bounded)] = Field(default_factory=dict)
    sass: Sha | None = None
    ptx: Sha | None = None
    note: Annotated[str, Field(max_length=2000)] = ""
    timestamp: Annotated[str, BeforeValidator(_rfc3339)]

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str) -> str:
        if value not in CELL_STATUSES:
            raise ValueError(f"must be one of {', '.join(CELL_STATUSES)}")
        return value

    @field_validator("message")
    @classmethod
    def _cap_message(cls, value: str) -> str:
        return cap_text(value, MESSAGE_MAX_BYTES)[0]

    def cell(self) -> MatrixCell:
        return MatrixCell.from_dict(self.model_dump())


class MatrixPost(BaseModel):
    """A matrix job's result: its cells, the toolchain's fingerprint and the listings the cells name."""

    model_config = ConfigDict(extra="forbid")

    cells: Annotated[list[CellIn], Field(min_length=1, max_length=MAX_CELLS_PER_POST)]
    fingerprint: Annotated[str, Field(max_length=128)] | None = Field(
        default=None, description="the toolchain's identity (runner Toolchain.fingerprint): the nightly stamp"
    )
    artifacts: dict[Sha, str] = Field(
        default_factory=dict, description="sha256 → normalised SASS/PTX text, for the hashes the cells name"
    )


class MatrixRefused(ValueError):
    """A post that cannot be stored; the message names the field (a 422)."""


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.get("loc", ())) or "the body"
    return f"field '{where}': {error.get('msg', 'invalid')}"


def accept_post(engine: Engine, raw: Any, store: ArtifactStore) -> CellsStored:
    """Check a worker's post (the model, the snippets on their pages, the listings' hashes and sizes) and store it.

    Refused whole with `MatrixRefused` naming the field; the listings go into the artifact store, the cells
    into `matrix_cell` (origin "request"), a cell older than the stored one of its key is kept out.
    """
    try:
        post = MatrixPost.model_validate(raw)
    except ValidationError as exc:
        raise MatrixRefused("; ".join(_describe(e) for e in exc.errors()[:20])) from None
    total = 0
    for digest, text in post.artifacts.items():
        data = text.encode()
        if len(data) > MAX_LISTING_BYTES:
            raise MatrixRefused(f"field 'artifacts.{digest}': longer than {MAX_LISTING_BYTES} bytes")
        if hashlib.sha256(data).hexdigest() != digest:
            raise MatrixRefused(f"field 'artifacts.{digest}': the text's sha256 is not its key")
        total += len(data)
    if total > MAX_SNIPPET_BYTES:
        raise MatrixRefused(f"field 'artifacts': more than {MAX_SNIPPET_BYTES} bytes in all")
    for n, cell in enumerate(post.cells):
        for kind in ("sass", "ptx"):
            digest = getattr(cell, kind)
            if digest and digest not in post.artifacts and store.get(digest) is None:
                raise MatrixRefused(f"field 'cells.{n}.{kind}': no listing {digest} in the post or the store")
    pages: dict[str, str] = {}
    with engine.connect() as conn:
        for chunk in chunks(sorted({c.snippet_id for c in post.cells}), 500):
            stmt = select(col(SnippetRow.id), col(SnippetRow.page_id)).where(col(SnippetRow.id).in_(chunk))
            pages.update((sid, pid) for sid, pid in conn.execute(stmt))
    for n, cell in enumerate(post.cells):
        if cell.snippet_id not in pages:
            raise MatrixRefused(f"field 'cells.{n}.snippet_id': no snippet '{cell.snippet_id}' in the index")
        if pages[cell.snippet_id] != cell.page_id:
            raise MatrixRefused(f"field 'cells.{n}.page_id': snippet '{cell.snippet_id}' is on page '{pages[cell.snippet_id]}'")
    for text in post.artifacts.values():
        store.put(text)
    with engine.begin() as conn:
        serialize_status_writers(conn)  # two posts of one cell at once: one waits for the other
        return store_cells(conn, [c.cell() for c in post.cells], REQUEST_ORIGIN, post.fingerprint)
