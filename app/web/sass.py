"""The SASS view, the diff view and /changes: server-rendered HTML over app/evidence/artifacts.py (no script needed).

/snippets/{id}/sass?target=…&toolchain=…   listing with source lines interleaved, families coloured and
                                            linked to their pages through the aliases, ptxas resources,
                                            the toolchain × target matrix and its flips
/snippets/{id}/diff?a=…&b=…[&target=…]     two listings aligned by source line
/changes[?page=…]                           flips between neighbouring toolchains
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.engine import Connection

from app.deps import ConnDep, PagesDep
from app.evidence.artifacts import FAMILY_ALIASES, ArtifactNotFound, families, matrix_data
from app.pages import Pages
from app.web.respond import html_page
from runner.sass import parse_listing

router = APIRouter(include_in_schema=False)
Param = Annotated[str | None, Query(max_length=64)]

KNOWN_FAMILIES = {
    "HGMMA": "tensor",
    "UTCHMMA": "tensor",
    "UTCQMMA": "tensor",
    "UTCBAR": "tensor",
    "LDTM": "tmem",
    "STTM": "tmem",
    "UTMALDG": "tma",
    "UTMASTG": "tma",
    "UBLKCP": "tma",
    "UTMACMDFLUSH": "tma",
    "SYNCS": "barrier",
    "BAR": "barrier",
    "WARPSYNC": "barrier",
    "LDG": "memory",
    "STG": "memory",
    "LDS": "memory",
    "STS": "memory",
    "LDSM": "memory",
    "STSM": "memory",
}
"""Instruction families coloured in a listing (CSS class `fam-<kind>`); any mnemonic still links when a page names it."""


def family_links(pages: Pages, conn: Connection, names: list[str]) -> dict[str, str]:
    """Mnemonic → page id, through the pages' aliases (HGMMA, UTMALDG…, or the PTX name in FAMILY_ALIASES)."""
    links: dict[str, str] = {}
    for name in names:
        page = pages.resolve(name, conn) or (pages.resolve(FAMILY_ALIASES[name], conn) if name in FAMILY_ALIASES else None)
        if page:
            links[name] = page
    return links


def _rows(text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for fn in parse_listing(text):
        rows.append({"kind": "function", "text": fn.name})
        insns = iter(fn.instructions)
        for kind, value in fn.items:
            if kind == "insn":
                insn = next(insns)
                rows.append({"kind": "insn", "text": value, "opcode": insn.opcode, "fam": KNOWN_FAMILIES.get(insn.opcode, "")})
            else:
                rows.append({"kind": kind, "text": value})
    return rows


def _error(request: Request, title: str, message: str) -> Response:
    return html_page(request, "sass.html", {"title": title, "error": message}, status=404)


def matrix_lines(request: Request, conn: Connection, snippet_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The matrix of each snippet that has cells, for the page's matrix lines (_matrix.html), read through the
    request's connection."""
    data = matrix_data(request)
    return {sid: data.matrix(sid, conn) for sid in snippet_ids if data.snippet_cells(sid, conn)}


@router.get("/snippets/{snippet_id}/sass")
def sass_view(
    request: Request, pages: PagesDep, conn: ConnDep, snippet_id: str, target: Param = None, toolchain: Param = None
) -> Response:
    data = matrix_data(request)
    try:
        listing = data.listing(snippet_id, target, toolchain, "sass", conn)
        matrix = data.matrix(snippet_id, conn)
    except ArtifactNotFound as exc:
        return _error(request, f"SASS of {snippet_id}", str(exc))
    names = families(listing.text)
    context = {
        "title": f"SASS of {snippet_id}",
        "listing": listing,
        "rows": _rows(listing.text),
        "links": family_links(pages, conn, names),
        "families": names,
        "matrix": matrix,
        "page_id": snippet_id.rpartition(":")[0],
    }
    return html_page(request, "sass.html", context)


@router.get("/snippets/{snippet_id}/diff")
def diff_view(request: Request, snippet_id: str, a: Param = None, b: Param = None, target: Param = None) -> Response:
    if not a or not b or a.startswith("sm_") != b.startswith("sm_"):
        return _error(
            request,
            f"Diff of {snippet_id}",
            "a, b: name two targets (a=sm_90a&b=sm_100a) or two releases (a=13.0&b=13.1&target=sm_90a)",
        )
    try:
        diff, left, right = matrix_data(request).diff(snippet_id, a, b, target)
    except ArtifactNotFound as exc:
        return _error(request, f"Diff of {snippet_id}", str(exc))
    context = {
        "title": f"{diff.a} against {diff.b}: {snippet_id}",
        "diff": diff,
        "left": left,
        "right": right,
        "snippet_id": snippet_id,
    }
    return html_page(request, "sass_diff.html", context)


@router.get("/changes")
def changes_view(request: Request, page: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    data = matrix_data(request)
    flips = data.flips(page or None)
    return html_page(
        request, "changes.html", {"title": "Toolchain changes", "flips": flips, "releases": data.releases(), "page": page or ""}
    )
