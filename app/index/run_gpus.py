"""Which GPUs ran a program that passed, per architecture family: what `/llms.txt` and the home page say ran where.

The statement is derived from the evidence held, never written into the text: a wiki whose evidence comes from a
machine without a GPU (`verify --compile-only`) must not be told that its programs ran on an H200. It is kept in
the `run_gpu` table (migration 0017), one row per family × GPU name, filled as records are stored
(app/evidence/store.py `store`, in the records' own transaction) and, for evidence stored before the table existed,
by the migration. So no request scans the evidence table: a read is one query over a few rows.

A record counts when its step is `run`, its status `pass` and it names the GPU it ran on (`gpu_name`). Its family
is the GPU's, from the record's `compute_capability` (`9.0` → Hopper), else from its target (`sm_100a` →
Blackwell). Blackwell is said to have run only when such a record names a Blackwell GPU; a record that names no
GPU proves no run on any.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from app.index.models import RunGpuRow
from snippets.architectures import compute_capability_of

BLACKWELL = "Blackwell"

FAMILIES: tuple[tuple[str, str], ...] = (
    ("Blackwell", "SM100/SM103"),
    ("Hopper", "SM90"),
    ("Ada", "SM89"),
    ("Ampere", "SM80/SM86"),
    ("Turing", "SM75"),
    ("Volta", "SM70"),
)
"""Architecture families, newest first, with the SM numbers shown beside the name."""


def family_of(target: str, compute_capability: str | None = None) -> str:
    """The architecture family of the GPU a record ran on: from its compute capability (`9.0`), else its target
    (`sm_90a`); "" when neither says (the target `any` without a compute capability)."""
    major = minor = None
    if compute_capability:
        try:
            major, minor = (int(x) for x in compute_capability.split(".", 1))
        except ValueError:
            major = minor = None
    if major is None:
        cc = compute_capability_of(target)
        if cc is None:
            return ""
        major, minor, _ = cc
    if major >= 10:
        return "Blackwell"  # 10.x (B200/B300), 11.0 (Thor), 12.x (RTX Blackwell)
    if major == 9:
        return "Hopper"
    if major == 8:
        return "Ada" if minor == 9 else "Ampere"
    if major == 7:
        return "Turing" if minor == 5 else "Volta"
    return f"SM{major}{minor}"


def ran_pairs(records: Iterable[tuple[str, str, str, str | None, str | None]]) -> set[tuple[str, str]]:
    """(family, GPU name) of the records that ran and passed naming their GPU; each record is
    (step, status, target, gpu_name, compute_capability)."""
    return {
        (family_of(target, cc) or "unknown", gpu.strip())
        for step, status, target, gpu, cc in records
        if step == "run" and status == "pass" and gpu and gpu.strip()
    }


def record_ran(conn: Connection, pairs: set[tuple[str, str]]) -> None:
    """Add the pairs `run_gpu` does not hold yet (in the caller's transaction: evidence writers are serialized,
    app/index/db.py `serialize_status_writers`, so no two add the same pair at once)."""
    if not pairs:
        return
    held = {(f, g) for f, g in conn.execute(select(col(RunGpuRow.family), col(RunGpuRow.gpu_name)))}
    new = sorted(pairs - held)
    if new:
        conn.execute(insert(RunGpuRow), [{"family": f, "gpu_name": g} for f, g in new])


def ran_on(conn: Connection) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Family → the GPUs that ran a program of it that passed, newest family first, GPUs by name; () when none."""
    found: dict[str, list[str]] = {}
    for family, gpu in conn.execute(select(col(RunGpuRow.family), col(RunGpuRow.gpu_name))):
        found.setdefault(family, []).append(gpu)
    order = {name: i for i, (name, _) in enumerate(FAMILIES)}
    return tuple((f, tuple(sorted(found[f]))) for f in sorted(found, key=lambda f: (order.get(f, len(order)), f)))


def _named(family: str) -> str:
    sm = dict(FAMILIES).get(family)
    return f"{family}, {sm}" if sm else family


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def ran_on_statement(ran: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    """What ran where, in words, from `ran_on`: true of the evidence held, whichever wiki it is."""
    if not ran:
        return (
            "No program has run on a GPU yet: the evidence is compile-only (no run step has passed), "
            "and no Blackwell (SM100/SM103) program has ever run."
        )
    where = _join([f"{_join(list(gpus))} ({_named(family)})" for family, gpus in ran])
    text = f"Programs ran and passed on {where}; no program has passed a run on any other architecture."
    if BLACKWELL not in dict(ran):
        text += " No Blackwell (SM100/SM103) GPU has been available: Blackwell programs are compiled but have never run."
    return text
