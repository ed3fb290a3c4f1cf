"""Repairing a damaged SQLite index (`kernelwiki index --rebuild`): set the file aside, keep its evidence.

The index is rebuilt from the wiki, but posted evidence exists only in it. So
before a damaged file is set aside (renamed, never deleted), every evidence
row that can still be read is copied out and stored again in the new index.
A readable index is not set aside at all: `--rebuild` then reparses every
file, and evidence tables are never dropped by reindexing.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.errors import index_path
from app.evidence.ingest import parse_record


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite index URL (None for other databases and in-memory SQLite)."""
    if not url.startswith("sqlite") or "///" not in url:
        return None
    path = index_path(url)
    return None if path in ("", ":memory:") else Path(path)


def is_damaged(path: Path) -> str | None:
    """Why the SQLite file cannot be trusted (quick_check), or None when it reads cleanly."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows)


def salvage_evidence(path: Path) -> list[tuple[dict[str, Any], str]]:
    """(record, origin) for every evidence row that can still be read from a damaged index (stops at the first unreadable page)."""
    found: list[tuple[dict[str, Any], str]] = []
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return found
    try:
        columns = {row[1] for row in con.execute("PRAGMA table_info(evidence)")}
        cursor = con.execute("SELECT data, origin FROM evidence" if "origin" in columns else "SELECT data, NULL FROM evidence")
        while True:
            row = cursor.fetchone()
            if row is None:
                break
            try:
                record = json.loads(row[0])
            except (TypeError, ValueError):
                continue
            if isinstance(record, dict):
                found.append((record, row[1] or "salvaged"))
    except sqlite3.Error:
        pass  # what was read before the damage is kept
    finally:
        con.close()
    return found


def rebuild_sqlite(url: str) -> list[str]:
    """Set a damaged SQLite index aside, keeping its evidence for the new one; lines saying what was done."""
    path = sqlite_file(url)
    if path is None or not path.exists():
        return []
    problem = is_damaged(path)
    if problem is None:
        return [f"{path}: the index reads cleanly; reparsing every page (evidence is kept)"]
    records = salvage_evidence(path)
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.replace(aside)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(aside.with_name(aside.name + suffix))
    lines = [f"{path}: damaged ({problem}); set aside as {aside}"]
    if records:
        from app.store import Store

        store = Store(url)
        try:
            store.create_schema()
            by_origin: dict[str, list[dict[str, Any]]] = {}
            for record, origin in records:
                by_origin.setdefault(origin, []).append(record)
            # Records the damaged index had already accepted, stored before the wiki is reindexed: so not put to
            # `accept`'s snippet check again (no snippet is indexed yet); only their shape is checked.
            now = datetime.now(UTC)
            inserted = sum(
                store.evidence.store([r for r, _ in map(parse_record, group) if r is not None], origin, now).inserted
                for origin, group in by_origin.items()
            )
        finally:
            store.engine.dispose()
        lines.append(f"{path}: {inserted} evidence records recovered from the damaged index")
    else:
        lines.append(
            f"{path}: no evidence could be read from the damaged index; committed evidence is reloaded from the evidence folder"
        )
    return lines
