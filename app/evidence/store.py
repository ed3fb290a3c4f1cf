"""Evidence in the index: importing runner records (idempotently) and attaching them to snippets.

A record is identified by its `record_id`, so importing the same JSONL twice,
or a worker delivering the same result twice, writes it once. The latest record
per snippet × target × step is the current one; a record made for other
snippet content is shown as stale, never as current.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, tuple_
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col, select

from app import keyset
from app.evidence.ingest import EvidenceIn, JSONProblem, canonical_stamp, current_rank, parse_json, parse_record
from app.evidence.matrix_cells import load_matrix_file
from app.index.db import bulk_insert, chunks, serialize_status_writers
from app.index.models import EvidenceRow, SnippetRow, SnippetTargetRow, table_of
from app.index.run_gpus import ran_on, ran_pairs, record_ran
from app.schemas import EvidencePublic, SnippetPublic
from runner import diagnostics, status as status_rules
from runner.status import STALE, SnippetSummary, StepFact, needed_steps, summarize_snippet
from snippets.architectures import target_sort_key
from snippets.snippet import NEVER_BUILT_MODES


@dataclass
class ImportResult:
    """What an evidence import did."""

    inserted: int = 0  # new records written
    duplicates: int = 0  # records already present (same record_id)
    errors: list[str] = field(default_factory=list)  # 'file:line: error: …' for rejected records


FUTURE_SLACK = timedelta(days=1)
"""A record may be stamped this far ahead of the service's clock (skew), no further: a far-future time would stay 'newest'."""


@dataclass(frozen=True)
class Refusal:
    """Why one record was refused: its position in what was offered (0-based), its id when it parsed, the reason."""

    position: int
    record_id: str | None
    reason: str

    def message(self) -> str:
        """As `POST /api/evidence` names it: 'record N (id): reason'."""
        return f"record {self.position}" + (f" ({self.record_id})" if self.record_id else "") + f": {self.reason}"


@dataclass
class Acceptance:
    """What `EvidenceStore.accept` made of the records offered."""

    records: list[EvidenceIn]  # the accepted ones, in the order offered
    positions: list[int]  # each accepted record's position in what was offered
    refused: list[Refusal]  # the others, in the order offered


HISTORY_LIMIT = 20
"""Records in one window of a snippet's history when the caller names no `limit` (HTTP and MCP)."""
HISTORY_MAX_LIMIT = 100
"""The most records one window may hold: a record keeps up to ~64 kB of output, so a window stays under ~7 MB."""


class HistoryKey(NamedTuple):
    """Where a window of a snippet's history ends: its last record's time and id (the next window starts after it).

    Sent to clients as an opaque `next` token (Datasette's keyset `_next`): URL-safe base64 of the JSON pair.
    """

    timestamp: str
    record_id: str

    def token(self) -> str:
        return keyset.token(self)

    @classmethod
    def from_token(cls, token: str) -> HistoryKey:
        """The key a `token()` encoded; ValueError for anything else."""
        return cls(*keyset.key_of(token, (str, str)))


@dataclass
class HistoryWindow:
    """One window of a snippet's evidence, newest first."""

    total: int  # records of the snippet, all windows together
    records: list[EvidencePublic]  # this window's
    next: HistoryKey | None  # where the next window starts; None when this one is the last


@contextmanager
def _connection(engine: Engine, conn: Connection | None) -> Iterator[Connection]:
    """`conn` itself when given (a request's one connection), else a connection of its own."""
    if conn is not None:
        yield conn
        return
    with engine.connect() as own:
        yield own


class EvidenceStore:
    """Evidence rows and the snippet views built on them."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.writer: Engine | None = None  # where `add` writes when `engine` is read-only (an extra `serve` worker)

    def count(self, conn: Connection) -> int:
        return conn.execute(select(func.count(col(EvidenceRow.record_id)))).scalar() or 0

    def ran_on(self, conn: Connection) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Which GPUs ran a program that passed, per architecture family (app/index/run_gpus.py): one read of the
        few rows `store` keeps, never a scan of the evidence."""
        return ran_on(conn)

    def accept(self, items: list[Any], received_at: datetime, whole: bool = False) -> Acceptance:
        """The one acceptance rule for evidence (POST, `evidence import`, start-up loading, `verify`).

        A record is accepted when it passes `EvidenceIn` (records already parsed are taken as they are), is
        stamped no later than `received_at + FUTURE_SLACK`, and names a snippet the index has, on the page
        the index has it on. `whole=True` (a post, refused whole): once a record is malformed the index is
        not asked about the snippets (the post is refused on those grounds alone).
        """
        accepted: list[EvidenceIn] = []
        positions: list[int] = []
        refused: list[Refusal] = []
        for n, raw in enumerate(items):
            record, problem = (raw, None) if isinstance(raw, EvidenceIn) else parse_record(raw)
            if record is None:
                refused.append(Refusal(n, None, problem or "not a record"))
            elif record.timestamp > received_at + FUTURE_SLACK:
                refused.append(Refusal(n, record.record_id, f"field 'timestamp': {record.stamp} is in the future"))
            else:
                accepted.append(record)
                positions.append(n)
        if whole and refused:
            return Acceptance([], [], refused)
        unfit = self._mismatches(accepted)
        if not any(unfit):
            return Acceptance(accepted, positions, refused)
        refused += [Refusal(n, r.record_id, why) for n, r, why in zip(positions, accepted, unfit, strict=True) if why]
        kept = [(n, r) for n, r, why in zip(positions, accepted, unfit, strict=True) if not why]
        return Acceptance([r for _, r in kept], [n for n, _ in kept], sorted(refused, key=lambda f: f.position))

    def add(self, records: list[Any], origin: str = "request", received_at: datetime | None = None) -> ImportResult:
        """Store the records `accept` accepts, once each; refused ones are reported ('origin:N: error: …'), the rest stored.

        Each is stored with its timestamp in sortable UTC form, the time the service received it, and
        where it came from (`origin`: "request", "verify" or the file).
        """
        received_at = received_at or datetime.now(UTC)
        acceptance = self.accept(records, received_at)
        result = ImportResult(errors=[f"{origin}:{f.position + 1}: error: {f.reason}" for f in acceptance.refused])
        return self.store(acceptance.records, origin, received_at, result)

    def store(
        self, records: list[EvidenceIn], origin: str, received_at: datetime, result: ImportResult | None = None
    ) -> ImportResult:
        """Write accepted records (`accept`'s), once each by `record_id`; the counts go into `result`."""
        result = result or ImportResult()
        good: dict[str, EvidenceIn] = {}
        for record in records:
            good.setdefault(record.record_id, record)
        if not good:
            return result
        received = canonical_stamp(received_at)
        with (self.writer or self.engine).begin() as conn:
            serialize_status_writers(conn)  # the statuses it stores are judged on snippet rows no reindex is replacing
            present: set[str] = set()
            ids = list(good)
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                present |= {
                    r for (r,) in conn.execute(select(EvidenceRow.record_id).where(col(EvidenceRow.record_id).in_(chunk)))
                }
            rows = [
                {
                    "record_id": r.record_id,
                    "snippet_id": r.snippet_id,
                    "page_id": r.page_id,
                    "target": r.target,
                    "step": r.step,
                    "status": r.status,
                    "content_hash": r.content_hash,
                    "timestamp": r.stamp,
                    "data": json.dumps(r.to_record()),
                    "received_at": received,
                    "origin": origin[:200],
                    "toolchain_release": r.toolchain_release,
                }
                for rid, r in good.items()
                if rid not in present
            ]
            if rows:
                conn.execute(insert(EvidenceRow), rows)
                self.refresh_statuses(conn, {str(r["snippet_id"]) for r in rows})  # in the same transaction as the records
                fresh = [good[str(r["record_id"])] for r in rows]  # what ran where (app/index/run_gpus.py), likewise
                record_ran(conn, ran_pairs((r.step, r.status, r.target, r.gpu_name, r.compute_capability) for r in fresh))
        result.inserted = len(rows)
        result.duplicates = len(good) - len(rows)
        return result

    def import_jsonl(self, path: Path) -> ImportResult:
        """Import one JSONL file; lines `accept` refuses are reported as 'file:line: error: why', the rest stored."""
        records: list[Any] = []
        errors: list[tuple[int, str]] = []  # (line, why)
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            return ImportResult(errors=[f"{path}:1: error: cannot read evidence: {exc}"])
        index: list[int] = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(parse_json(line))
                index.append(n)
            except JSONProblem as exc:
                errors.append((n, str(exc)))
        received_at = datetime.now(UTC)
        acceptance = self.accept(records, received_at)
        errors += [(index[f.position], f.reason) for f in acceptance.refused]
        result = ImportResult(errors=[f"{path}:{n}: error: {why}" for n, why in sorted(errors)])
        return self.store(acceptance.records, str(path), received_at, result)

    def load_dir(self, folder: Path) -> ImportResult:
        """Import every `*.jsonl` under a folder (the committed evidence), and its toolchain matrix
        (`matrix/cells.jsonl`, into `matrix_cell`: app/evidence/matrix_cells.py)."""
        total = ImportResult()
        for path in sorted(Path(folder).glob("*.jsonl")) if Path(folder).is_dir() else []:
            r = self.import_jsonl(path)
            total.inserted += r.inserted
            total.duplicates += r.duplicates
            total.errors += r.errors
        total.errors += load_matrix_file(self.writer or self.engine, Path(folder)).errors
        return total

    def _mismatches(self, records: list[EvidenceIn]) -> list[str | None]:
        """Per record, why it does not fit the index (an unknown snippet id, or a page other than the snippet's), or None."""
        wanted = sorted({r.snippet_id for r in records})
        pages: dict[str, str] = {}
        with self.engine.connect() as conn:
            for chunk in chunks(wanted, 500):
                pages.update(
                    (sid, pid)
                    for sid, pid in conn.execute(select(SnippetRow.id, SnippetRow.page_id).where(col(SnippetRow.id).in_(chunk)))
                )
        return [
            f"no snippet '{r.snippet_id}' in the index"
            if r.snippet_id not in pages
            else f"snippet '{r.snippet_id}' is on page '{pages[r.snippet_id]}', not '{r.page_id}'"
            if pages[r.snippet_id] != r.page_id
            else None
            for r in records
        ]

    def export_jsonl(self, out: Any, origin: str | None = None) -> int:
        """Write every stored record (or those of one origin, e.g. "request") as JSONL to `out`, oldest first.

        Each line is the record as stored plus `received_at`; `kernelwiki evidence import`
        reads it back (it ignores `received_at`). Returns how many lines were written.
        """
        stmt = select(EvidenceRow.data, EvidenceRow.received_at).order_by(EvidenceRow.timestamp, EvidenceRow.record_id)
        if origin is not None:
            stmt = stmt.where(EvidenceRow.origin == origin)
        count = 0
        with self.engine.connect() as conn:
            for data, received in conn.execution_options(yield_per=1000).execute(stmt):
                record = json.loads(data)
                if received:
                    record["received_at"] = received
                out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
        return count

    # -- stored statuses ---------------------------------------------------------

    def refresh_statuses(self, conn: Connection, snippet_ids: set[str] | list[str]) -> None:
        """Judge these snippets by their evidence (runner/status.py, through `snippets_with_evidence`) and store
        the verdict: `snippet.status` and one `snippet_target` line per dashboard row.

        Called in the writer's transaction wherever a status can change: when records are stored (`add`) and when
        the indexer writes snippet rows (new or edited code, whose older records turn stale). Ids of no indexed
        snippet are ignored.
        """
        for chunk in chunks(sorted(snippet_ids), 500):
            judged = self.snippets_with_evidence(conn, ids=chunk)
            conn.execute(delete(SnippetTargetRow).where(col(SnippetTargetRow.snippet_id).in_(chunk)))
            bulk_insert(
                conn,
                SnippetTargetRow,
                [
                    {
                        "snippet_id": s.id,
                        "page_id": s.page_id,
                        "position": s.position,
                        "target": target,
                        "target_order": target_sort_key(target)[0],
                        "status": status,
                        "status_rank": status_rules.rank(status),
                    }
                    for s in judged
                    for target, status in status_lines(s)
                ],
            )
            if judged:
                mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
                conn.exec_driver_sql(f"UPDATE snippet SET status = {mark} WHERE id = {mark}", [(s.status, s.id) for s in judged])

    def judge_missing(self) -> int:
        """Judge every snippet without a stored status (an index from before migration 0009); how many were judged."""
        with (self.writer or self.engine).begin() as conn:
            ids = [r[0] for r in conn.execute(select(SnippetRow.id).where(col(SnippetRow.status).is_(None)))]
            self.refresh_statuses(conn, ids)
        return len(ids)

    # -- views -------------------------------------------------------------------

    @staticmethod
    def _public(row: Any, current_hash: str | None) -> EvidencePublic:
        data = json.loads(row.data)
        return EvidencePublic(
            record_id=row.record_id,
            snippet_id=row.snippet_id,
            target=row.target,
            step=row.step,
            status=row.status,
            stale=current_hash is not None and row.content_hash != current_hash,
            message=data.get("message"),
            timestamp=row.timestamp,
            data=data,
            warnings=record_warnings(data),
        )

    def snippets_with_evidence(
        self,
        conn: Connection,
        page_id: str | None = None,
        lang: str | None = None,
        target: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        ids: list[str] | None = None,
    ) -> list[SnippetPublic]:
        """Snippets with the latest record per target and step; filters apply to the overall status.

        `ids` (one window from `app.evidence.status.snippet_window`) reads only those snippets' evidence;
        without `ids` or `page_id` every snippet and evidence row is read (the CLI's and tests' use, never a request's).
        """
        stmt = table_of(SnippetRow).select().order_by(col(SnippetRow.page_id), col(SnippetRow.position))
        if ids is not None:
            stmt = stmt.where(col(SnippetRow.id).in_(ids))
        if page_id:
            stmt = stmt.where(col(SnippetRow.page_id) == page_id)
        if lang:
            stmt = stmt.where(col(SnippetRow.lang) == lang)
        snippets = list(conn.execute(stmt))
        ev_stmt = table_of(EvidenceRow).select().order_by(EvidenceRow.timestamp)
        if ids is not None:
            ev_stmt = ev_stmt.where(col(EvidenceRow.snippet_id).in_(ids))
        if page_id:
            ev_stmt = ev_stmt.where(col(EvidenceRow.page_id) == page_id)
        latest: dict[tuple[str, str, str], Any] = {}
        current_hash = {s.id: s.content_hash for s in snippets}
        for row in conn.execute(ev_stmt):
            if row.snippet_id not in current_hash:
                continue
            key = (row.snippet_id, row.target, row.step)
            prev = latest.get(key)
            # The current content's evidence wins over stale evidence, the default toolchain's, then the newest.
            fresh = row.content_hash == current_hash[row.snippet_id]
            rank = current_rank(fresh, row.toolchain_release, row.timestamp)
            if prev is None or rank >= current_rank(
                prev.content_hash == current_hash[row.snippet_id], prev.toolchain_release, prev.timestamp
            ):
                latest[key] = row
        per_snippet: dict[str, dict[str, list[EvidencePublic]]] = defaultdict(lambda: defaultdict(list))
        for (sid, tgt, _step), row in sorted(latest.items()):
            per_snippet[sid][tgt].append(self._public(row, current_hash[sid]))
        out = []
        for s in snippets:
            data = json.loads(s.data)
            evidence = {t: recs for t, recs in per_snippet.get(s.id, {}).items()}
            targets = json.loads(s.targets)
            if target and target not in targets:
                continue
            summary = snippet_summary(s.mode, evidence, targets, sass_checked(data))
            if status and summary.status != status:
                continue
            warnings = snippet_warnings(evidence, targets)
            out.append(
                SnippetPublic(
                    id=s.id,
                    page_id=s.page_id,
                    position=s.position,
                    line=s.line,
                    lang=s.lang,
                    mode=s.mode,
                    targets=targets,
                    content_hash=s.content_hash,
                    info=data.get("info"),
                    source=data.get("source"),
                    status=summary.status,
                    summary=summary.text,
                    target_status=summary.targets,
                    warnings=warnings,
                    evidence=evidence,
                )
            )
        if limit is not None:
            out = out[offset : offset + limit]
        return out

    def history(
        self, snippet_id: str, limit: int, after: HistoryKey | None = None, conn: Connection | None = None
    ) -> HistoryWindow | None:
        """One window of a snippet's records, newest first, after `after` (keyset, in SQL); None for an unknown snippet.

        Ordered by (timestamp, record_id) descending: record ids are unique, so the order is total and a window
        starts exactly where the last one ended, however many records arrive meanwhile.
        """
        with _connection(self.engine, conn) as conn:
            snip = conn.execute(select(SnippetRow.content_hash).where(SnippetRow.id == snippet_id)).scalar()
            if snip is None:
                return None
            total = conn.execute(select(func.count()).where(col(EvidenceRow.snippet_id) == snippet_id)).scalar() or 0
            query = table_of(EvidenceRow).select().where(col(EvidenceRow.snippet_id) == snippet_id)
            if after is not None:
                query = query.where(tuple_(col(EvidenceRow.timestamp), col(EvidenceRow.record_id)) < tuple_(*after))
            rows = list(
                conn.execute(
                    query.order_by(col(EvidenceRow.timestamp).desc(), col(EvidenceRow.record_id).desc()).limit(limit + 1)
                )
            )
            records = [self._public(r, snip) for r in rows[:limit]]
            more = len(rows) > limit
            return HistoryWindow(
                total, records, HistoryKey(rows[limit - 1].timestamp, rows[limit - 1].record_id) if more else None
            )


NO_TARGET = "—"
"""The target of the one dashboard line of a block that is never built (sketch, fragment, invalid block)."""


def status_lines(s: SnippetPublic) -> list[tuple[str, str]]:
    """(target, status) of each line the evidence dashboard shows for a judged snippet: its declared targets,
    then targets it has records for; one `NO_TARGET` line for a block that is never built."""
    if s.mode in NEVER_BUILT_MODES:
        return [(NO_TARGET, s.status)]
    targets = list(s.targets) + [t for t in s.evidence if t not in s.targets]
    return [(t, s.target_status.get(t) or target_status(s.evidence.get(t, []))) for t in targets]


def status_without_evidence(snippet: dict[str, Any]) -> tuple[str, list[tuple[str, int, str, int]]]:
    """What `refresh_statuses` stores for a snippet that no record names yet, from the snippet alone
    (`Snippet.to_dict()`): its status, and its dashboard lines as (target, target order, status, status rank).

    The index's parse workers write it with the snippet's row (app/index/build.py), so a reindex judges
    in SQL only the snippets that have records.
    """
    mode, targets = snippet["mode"], list(snippet["targets"])
    summary = snippet_summary(mode, {}, targets, sass_checked(snippet))
    if mode in NEVER_BUILT_MODES:
        lines = [(NO_TARGET, summary.status)]
    else:
        lines = [(t, summary.targets.get(t) or target_status([])) for t in targets]
    return summary.status, [(t, target_sort_key(t)[0], st, status_rules.rank(st)) for t, st in lines]


def record_warnings(data: dict[str, Any]) -> list[str]:
    """A record's compiler warnings that change what its pass means (read from the output of older records)."""
    given = data.get("warnings")
    if isinstance(given, list):
        return [str(w) for w in given]
    return diagnostics.record_warnings(str(data.get("step") or ""), str(data.get("lang") or ""), str(data.get("output") or ""))


def sass_checked(snippet_data: dict[str, Any]) -> bool:
    """Whether a snippet (its stored data) declares SASS checks, which every target must then pass."""
    checks = snippet_data.get("checks") or {}
    return bool(isinstance(checks, dict) and (checks.get("sass") or checks.get("no_sass")))


def step_facts(records: list[EvidencePublic]) -> dict[str, StepFact]:
    """One target's current records as step → status (`stale` for a record of other content) and message."""
    return {r.step: StepFact(STALE if r.stale else r.status, r.message or "") for r in records}


def target_status(records: list[EvidencePublic], mode: str | None = None, sass: bool = False) -> str:
    """One target's status (runner/status.py): with `mode`, every step that mode needs must be there."""
    facts = {step: f.status for step, f in step_facts(records).items()}
    return status_rules.target_status(facts, needed_steps(mode, sass) if mode else None)


def snippet_summary(
    mode: str, evidence: dict[str, list[EvidencePublic]], targets: list[str], sass: bool = False
) -> SnippetSummary:
    """What a snippet's evidence proves over its declared `targets`: status, sentence, status per target."""
    facts = {t: step_facts(recs) for t, recs in evidence.items()}
    return summarize_snippet(mode, targets, facts, sass)


def snippet_status(mode: str, evidence: dict[str, list[EvidencePublic]], targets: list[str], sass: bool = False) -> str:
    """A snippet's overall status over its declared `targets` (`pass` only when every one passed every needed step)."""
    return snippet_summary(mode, evidence, targets, sass).status


def snippet_warnings(evidence: dict[str, list[EvidencePublic]], targets: list[str]) -> list[str]:
    """Warnings of the current, passing records of the declared targets, each once, with the targets it came from."""
    where: dict[str, list[str]] = {}
    for t in targets:
        for r in evidence.get(t, []):
            if not r.stale and r.status == "pass":
                for w in r.warnings:
                    where.setdefault(w, []).append(t)
    return [f"{w} (on {', '.join(dict.fromkeys(ts))})" for w, ts in where.items()]


def page_evidence_text(snippets: list[SnippetPublic]) -> str:
    """What a page's code was proven to do, per target: "ran on sm_90a · compiled for sm_100a, never run: no SM100 GPU"."""
    ran: list[str] = []
    built: list[str] = []
    never_run: dict[str, list[str]] = {}  # target → why its programs did not run
    expected: list[str] = []
    unproven: list[str] = []
    targets = sorted({t for s in snippets if s.mode not in NEVER_BUILT_MODES for t in s.targets}, key=target_sort_key)
    for t in targets:
        current = [(s, r) for s in snippets if t in s.targets for r in s.evidence.get(t, []) if not r.stale]
        if any(s.mode == "run" and s.target_status.get(t) == "pass" for s in snippets):
            ran.append(t)
        elif any(r.step == "compile" and r.status == "pass" for _, r in current):
            reasons = [
                status_rules.skip_reason(t, r.message or "")
                for s, r in current
                if s.mode == "run" and r.step == "run" and r.status == "skipped"
            ]
            if reasons:
                never_run[t] = reasons
            else:
                built.append(t)
        elif any(r.status == "xfail" for _, r in current):
            expected.append(t)
        else:
            unproven.append(t)
    parts = [f"ran on {', '.join(ran)}"] if ran else []
    if built:
        parts.append(f"compiled for {', '.join(built)}")
    if never_run:
        parts.append(
            f"compiled for {', '.join(never_run)}, never run: {status_rules.or_reasons([r for rs in never_run.values() for r in rs])}"
        )
    if expected:
        parts.append(f"only expected compile failures checked on {', '.join(expected)}")
    if unproven:
        parts.append(f"nothing verified on {', '.join(unproven)}")
    return " · ".join(parts)

