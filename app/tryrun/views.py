"""The try editor in the browser: `/try` (editor, target picker, Run, result panel), `/try/{id}` (the share page).

`/static/try.js` posts the form to `POST /api/try` and fills the result panel from the event stream; without
JavaScript the same form posts to `POST /try`, which waits for the result and answers with the share page
(303). The token is a field of the form (or, with JavaScript, kept in the tab's sessionStorage): no cookie
carries it, so no other site can make a browser spend it. "Open in Compiler Explorer" is a link built in
the page (godbolt.org's client-state URL); the server never calls Compiler Explorer.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.api.evidence import read_capped
from app.tryrun.routes import OFF, TRY_ID, admit
from app.tryrun.service import TryService, public_row
from app.tryrun.stream import wait_done
from app.tryrun.tokens import Refused
from app.tryrun.work.unit import KNOWN_TARGETS, Invalid, TryIn, build_unit
from app.web.respond import html_page
from snippets.attributes import tokenize

router = APIRouter(include_in_schema=False)

FORM_MAX_BYTES = 512 * 1024
"""A larger form body is refused (413) before it is parsed."""
EDITOR_TARGETS = ("sm_90a", "sm_90", "sm_100a", "sm_80", "any")
"""Targets the picker offers first (every known target can be typed in the API)."""
DROPPED_ON_EDIT = {"id", "uses", "chain", "arch"}
"""Page-only attributes left out of the editor: a try run is one block, and its targets come from the picker."""


def _service(request: Request) -> TryService:
    service = getattr(request.app.state, "tryrun", None)
    if service is None:
        raise HTTPException(404, OFF)
    return service


def editable_attributes(info: str) -> str:
    """A page block's attributes as the editor starts with them: without the page-only ones (DROPPED_ON_EDIT)."""
    words = info.split(None, 1)
    rest = words[1] if len(words) > 1 else ""
    try:
        tokens = tokenize(rest)
    except ValueError:
        return rest
    kept = []
    for key, value in tokens:
        if key in DROPPED_ON_EDIT:
            continue
        if value is None:
            kept.append(key)
        else:
            kept.append(f'{key}="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"')
    return " ".join(kept)


def compiler_explorer_url(source: str, lang: str, flags: str) -> str:
    """godbolt.org's client-state link: an editor with `source` and a compiler pane with `flags` (no request is made)."""
    language = {"cuda": "cuda", "cpp": "c++", "ptx": "ptx", "python": "python"}.get(lang, "cuda")
    compiler = {"cuda": "nvcc130", "c++": "g141", "ptx": "ptxas130", "python": "python313"}.get(language, "nvcc130")
    state = {
        "sessions": [
            {
                "id": 1,
                "language": language,
                "source": source,
                "compilers": [{"id": compiler, "options": flags}],
            }
        ]
    }
    encoded = base64.b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()
    return "https://godbolt.org/clientstate/" + encoded.replace("/", "_").replace("+", "-")


def ce_flags(attributes: str, target: str) -> str:
    """nvcc flags for Compiler Explorer: the target's -arch and the block's flags=."""
    flags = [f"-arch={target}"] if target.startswith("sm_") else []
    try:
        flags += [w for key, value in tokenize(attributes) if key == "flags" and value for w in value.split()]
    except ValueError:
        pass
    return " ".join(flags)


def _editor_context(service: TryService, values: dict[str, Any], problems: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    targets = values.get("targets") or ["sm_90a"]
    picker = list(dict.fromkeys([*EDITOR_TARGETS, *targets]))
    return {
        "title": "Edit & run",
        "values": values,
        "chosen": set(targets),
        "picker": picker,
        "known_targets": KNOWN_TARGETS,
        "problems": problems or [],
        "anonymous": service.settings.try_anonymous,
        "ce_url": compiler_explorer_url(
            values.get("source", ""), values.get("lang", "cuda"), ce_flags(values.get("attributes", ""), targets[0])
        ),
        "limits": {
            "source": service.settings.try_max_source_bytes,
            "timeout": service.settings.try_max_timeout_s,
            "compiles": service.settings.try_compiles_per_hour,
            "gpu": service.settings.try_gpu_seconds_per_day,
        },
    }


@router.get("/try")
def editor(request: Request, snippet: Annotated[str | None, Query(max_length=300)] = None) -> Response:
    """The editor, with a page snippet's code and attributes when `snippet` names one."""
    service = _service(request)
    values: dict[str, Any] = {"source": "", "lang": "cuda", "attributes": "", "targets": ["sm_90a"], "snippet_id": ""}
    if snippet:
        data = _snippet_data(request, snippet)
        if data is None:
            raise HTTPException(
                404, f"no snippet '{snippet}' (snippet ids are PAGE_ID:N, as the page's evidence panels name them)"
            )
        chain = "".join(part["source"] for part in data.get("chain", []))
        values = {
            "source": chain + data["full_source"],
            "lang": data["lang"],
            "attributes": editable_attributes(data["info"]),
            "targets": [t for t in data["targets"] if t] or ["sm_90a"],
            "snippet_id": snippet,
        }
    return html_page(request, "try.html", _editor_context(service, values))


def _snippet_data(request: Request, snippet_id: str) -> dict[str, Any] | None:
    """A page snippet as the index keeps it (Snippet.to_dict()), or None."""
    from sqlalchemy import select
    from sqlmodel import col

    from app.index.models import SnippetRow

    store = request.app.state.store
    if store is None:
        return None
    with store.engine.connect() as conn:
        found = conn.execute(select(col(SnippetRow.data)).where(col(SnippetRow.id) == snippet_id)).first()
    return json.loads(found[0]) if found is not None else None


@router.post("/try")
async def run_form(request: Request) -> Response:
    """The form without JavaScript: run, wait for the result, and show its share page (303); problems re-show the
    editor with the message next to the field."""
    service = _service(request)
    raw = await read_capped(request, FORM_MAX_BYTES)
    form = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)

    def one(name: str) -> str:
        return (form.get(name) or [""])[0]

    values: dict[str, Any] = {
        "source": one("source"),
        "lang": one("lang") or "cuda",
        "attributes": one("attributes"),
        "targets": [t for t in form.get("targets", []) if t],
        "snippet_id": one("snippet_id"),
    }
    token = one("token").strip()
    try:
        caller = await run_in_threadpool(service.caller, f"Bearer {token}" if token else None)
    except Refused as exc:
        problem = {"loc": ["body", "token"], "msg": exc.detail}
        return html_page(request, "try.html", _editor_context(service, values, [problem]), status=exc.status)
    try:
        unit = build_unit(
            TryIn(
                source=values["source"],
                lang=values["lang"],
                targets=values["targets"],
                attributes=values["attributes"],
                snippet_id=values["snippet_id"] or None,
            ),
            service.settings.try_max_source_bytes,
            service.settings.try_max_targets,
            service.settings.try_max_timeout_s,
        )
    except Invalid as exc:
        return html_page(request, "try.html", _editor_context(service, values, [p.to_dict() for p in exc.problems]), status=422)
    try:
        submitted = await run_in_threadpool(admit, service, unit, caller)
    except HTTPException as exc:
        problem = {"loc": ["body", "quota"], "msg": str(exc.detail)}
        return html_page(
            request,
            "try.html",
            _editor_context(service, values, [problem]),
            status=exc.status_code,
            headers=dict(exc.headers or {}),
        )
    await wait_done(service.results, submitted.row.id)
    return RedirectResponse(f"/try/{submitted.row.id}", status_code=303)


@router.get("/try/{try_id}")
def share_page(request: Request, try_id: TRY_ID) -> Response:
    """A try run's share page: source, attributes, and the result (build log, SASS, output) once done."""
    service = _service(request)
    row = service.results.get(try_id)
    if row is None:
        raise HTTPException(404, f"no try run '{try_id}'")
    run = public_row(row)
    result = run["result"]
    headers = {"Refresh": "2"} if row.state != "done" else None  # without JavaScript: look again until done
    target = run["targets"][0] if run["targets"] else "sm_90a"
    context = {
        "title": f"Try run {try_id}",
        "run": run,
        "result": result,
        "ce_url": compiler_explorer_url(run["source"], run["lang"], ce_flags(run["attributes"], target)),
    }
    return html_page(request, "try_result.html", context, headers=headers)
