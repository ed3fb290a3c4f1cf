"""Evidence in the index: importing runner records (idempotently) and attaching them to snippets.

A record is identified by its `record_id`, so importing the same JSONL twice,
or a worker delivering the same result twice, writes it once. The latest record
per snippet × target × step is the current one; a record made for other
snippet content is shown as stale, never as current.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection, Engine

from app.models import EvidenceRow, SnippetRow
from app.schemas import EvidencePublic, SnippetPublic

REQUIRED = ("record_id", "snippet_id", "page_id", "target", "step", "status", "content_hash", "timestamp")
STATUSES = frozenset({"pass", "fail", "xfail", "timeout", "error", "skipped", "unverified"})
STEPS = frozenset({"compile", "run", "sass", "ptx", "check"})


@dataclass
class ImportResult:
    """What an evidence import did."""

    inserted: int = 0  # new records written
    duplicates: int = 0  # records already present (same record_id)
    errors: list[str] = field(default_factory=list)  # 'file:line: error: …' for rejected records


def validate_record(record: Any) -> str | None:
    """Why a record cannot be stored, or None when it is well-formed."""
    if not isinstance(record, dict):
        return "a record must be a JSON object"
    missing = [k for k in REQUIRED if not isinstance(record.get(k), str) or not record.get(k)]
    if missing:
        return f"missing or non-string field(s): {', '.join(missing)}"
    if record["status"] not in STATUSES:
        return f"unknown status '{record['status']}'"
    if record["step"] not in STEPS:
        return f"unknown step '{record['step']}'"
    return None


class EvidenceStore:
    """Evidence rows and the snippet views built on them."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def count(self, conn: Connection) -> int:
        return conn.execute(select(func.count(EvidenceRow.record_id))).scalar() or 0

    def add(self, records: list[dict[str, Any]], origin: str = "request") -> ImportResult:
        """Store well-formed records once each; malformed ones are reported, the rest still stored."""
        result = ImportResult()
        good: dict[str, dict[str, Any]] = {}
        for i, record in enumerate(records, 1):
            problem = validate_record(record)
            if problem:
                result.errors.append(f"{origin}:{i}: error: {problem}")
            else:
                good.setdefault(record["record_id"], record)
        if not good:
            return result
        with self.engine.begin() as conn:
            present: set[str] = set()
            ids = list(good)
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                present |= {r for (r,) in conn.execute(select(EvidenceRow.record_id).where(EvidenceRow.record_id.in_(chunk)))}
            rows = [
                {
                    "record_id": r["record_id"], "snippet_id": r["snippet_id"], "page_id": r["page_id"],
                    "target": r["target"], "step": r["step"], "status": r["status"],
                    "content_hash": r["content_hash"], "timestamp": r["timestamp"], "data": json.dumps(r),
                }
                for rid, r in good.items() if rid not in present
            ]  # fmt: skip
            if rows:
                conn.execute(insert(EvidenceRow), rows)
        result.inserted = len(rows)
        result.duplicates = len(good) - len(rows)
        return result

    def import_jsonl(self, path: Path) -> ImportResult:
        """Import one JSONL file; bad lines are reported with their line number."""
        records: list[Any] = []
        errors: list[str] = []
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            return ImportResult(errors=[f"{path}:1: error: cannot read evidence: {exc}"])
        index: list[int] = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
                index.append(n)
            except json.JSONDecodeError as exc:
                errors.append(f"{path}:{n}: error: invalid JSON: {exc.msg}")
        result = self.add(records, origin=str(path))
        # Map record positions back to file lines for the messages.
        fixed = []
        for msg in result.errors:
            head, _, rest = msg.partition(": error: ")
            pos = int(head.rsplit(":", 1)[1])
            fixed.append(f"{path}:{index[pos - 1]}: error: {rest}")
        result.errors = errors + fixed
        return result

    def load_dir(self, folder: Path) -> ImportResult:
        """Import every `*.jsonl` under a folder (the committed evidence)."""
        total = ImportResult()
        for path in sorted(Path(folder).glob("*.jsonl")) if Path(folder).is_dir() else []:
            r = self.import_jsonl(path)
            total.inserted += r.inserted
            total.duplicates += r.duplicates
            total.errors += r.errors
        return total

    # -- views -------------------------------------------------------------------

    @staticmethod
    def _public(row: Any, current_hash: str | None) -> EvidencePublic:
        data = json.loads(row.data)
        return EvidencePublic(
            record_id=row.record_id, snippet_id=row.snippet_id, target=row.target, step=row.step,
            status=row.status, stale=current_hash is not None and row.content_hash != current_hash,
            message=data.get("message"), timestamp=row.timestamp, data=data,
        )  # fmt: skip

    def snippets_with_evidence(
        self, conn: Connection, page_id: str | None = None, lang: str | None = None,
        target: str | None = None, status: str | None = None, limit: int | None = None, offset: int = 0,
    ) -> list[SnippetPublic]:  # fmt: skip
        """Snippets with the latest record per target and step; filters apply to the overall status."""
        stmt = SnippetRow.__table__.select().order_by(SnippetRow.page_id, SnippetRow.position)
        if page_id:
            stmt = stmt.where(SnippetRow.page_id == page_id)
        if lang:
            stmt = stmt.where(SnippetRow.lang == lang)
        snippets = list(conn.execute(stmt))
        ev_stmt = EvidenceRow.__table__.select().order_by(EvidenceRow.timestamp)
        if page_id:
            ev_stmt = ev_stmt.where(EvidenceRow.page_id == page_id)
        latest: dict[tuple[str, str, str], Any] = {}
        current_hash = {s.id: s.content_hash for s in snippets}
        for row in conn.execute(ev_stmt):
            if row.snippet_id not in current_hash:
                continue
            key = (row.snippet_id, row.target, row.step)
            prev = latest.get(key)
            # The current content's evidence wins over stale evidence, then the newest.
            fresh = row.content_hash == current_hash[row.snippet_id]
            if prev is None or (fresh, row.timestamp) >= (prev.content_hash == current_hash[row.snippet_id], prev.timestamp):
                latest[key] = row
        per_snippet: dict[str, dict[str, list[EvidencePublic]]] = defaultdict(lambda: defaultdict(list))
        for (sid, tgt, _step), row in sorted(latest.items()):
            per_snippet[sid][tgt].append(self._public(row, current_hash[sid]))
        from app.store import _target_status

        out = []
        for s in snippets:
            data = json.loads(s.data)
            evidence = {t: recs for t, recs in per_snippet.get(s.id, {}).items()}
            targets = json.loads(s.targets)
            if target and target not in targets:
                continue
            overall = snippet_status(s.mode, evidence, targets, _target_status)
            if status and overall != status:
                continue
            out.append(SnippetPublic(
                id=s.id, page_id=s.page_id, position=s.position, line=s.line, lang=s.lang, mode=s.mode,
                targets=targets, content_hash=s.content_hash, info=data.get("info"),
                source=data.get("source"), status=overall, evidence=evidence,
            ))  # fmt: skip
        if limit is not None:
            out = out[offset : offset + limit]
        return out

    def history(self, snippet_id: str) -> list[EvidencePublic] | None:
        """Every record of a snippet, newest first; None when the snippet is unknown."""
        with self.engine.connect() as conn:
            snip = conn.execute(select(SnippetRow.content_hash).where(SnippetRow.id == snippet_id)).scalar()
            if snip is None:
                return None
            rows = conn.execute(
                EvidenceRow.__table__.select().where(EvidenceRow.snippet_id == snippet_id).order_by(EvidenceRow.timestamp.desc())
            )
            return [self._public(r, snip) for r in rows]


def snippet_status(mode: str, evidence: dict[str, list[EvidencePublic]], targets: list[str], target_status: Any) -> str:
    """A snippet's overall status over its targets: the worst current outcome, stale, or unknown."""
    if mode == "sketch":
        return "unverified"
    if not evidence:
        return "unknown"
    statuses = {target_status(recs) for recs in evidence.values()}
    for status in ("error", "timeout", "fail", "stale", "unverified", "pass", "xfail", "skipped"):
        if status in statuses:
            return status
    return "unknown"
