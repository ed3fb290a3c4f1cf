"""`Health`: what the index holds (pages, files, snippets, evidence records) and its first errors, for `/api/health`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from app.evidence.store import EvidenceStore
from app.index.db import connected
from app.index.models import DiagnosticRow, FileRow, PageRow, SnippetRow, table_of

ERRORS_SHOWN = 50


class Health:
    """Counts of one database (`engine`, for a connection of its own when the caller has none)."""

    def __init__(self, engine: Engine, evidence: EvidenceStore) -> None:
        self.engine = engine
        self.evidence = evidence

    def counts(self, conn: Connection | None = None) -> dict[str, Any]:
        """`status: ok`, the database's dialect, the counts, and the first index errors as `path:line: error: message`."""
        with connected(self.engine, conn) as conn:
            counts = {
                "pages": conn.execute(select(func.count(col(PageRow.id)))).scalar(),
                "files": conn.execute(select(func.count(col(FileRow.path)))).scalar(),
                "files_with_errors": conn.execute(
                    select(func.count(col(FileRow.path))).where(col(FileRow.page_id).is_(None))
                ).scalar(),
                "snippets": conn.execute(select(func.count(col(SnippetRow.id)))).scalar(),
                "evidence_records": self.evidence.count(conn),
            }
            diags = [
                f"{d.path}:{d.line}: {d.severity}: {d.message}"
                for d in conn.execute(
                    table_of(DiagnosticRow)
                    .select()
                    .where(col(DiagnosticRow.severity) == "error")
                    .order_by(col(DiagnosticRow.path), col(DiagnosticRow.line))
                    .limit(ERRORS_SHOWN)
                )
            ]
        return {"status": "ok", "database": self.engine.dialect.name, **counts, "errors": diags}
