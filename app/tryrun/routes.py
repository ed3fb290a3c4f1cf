"""`POST /api/try` (a try run, streamed as Server-Sent Events) and `GET /api/try/{id}` (a try run as JSON).

Off unless the operator turned try runs on (`kernelwiki serve --try`, KERNELWIKI_TRY=1): then every route here
answers 404 saying so. Errors use the one error shape (app/errors.py): 401/403 name the Authorization header,
422 the body field, 429 the quota and when it refills (with Retry-After).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.api.evidence import read_capped
from app.deps import require_runner_token
from app.evidence.ingest import JSONProblem, parse_json
from app.tryrun.pool import PoolFull
from app.tryrun.service import QuotaExceeded, Submitted, TryService, public_row
from app.tryrun.stream import progress, wait_done
from app.tryrun.tokens import Caller, Refused
from app.tryrun.work.unit import Invalid, TryIn, Unit, build_unit

router = APIRouter(prefix="/api", tags=["try"])

OFF = "try runs are off on this server: the operator turns them on with `kernelwiki serve --try` or KERNELWIKI_TRY=1"
TRY_ID_PATTERN = r"^[0-9a-f]{24}$"
"""A try run's id: the first 24 hex digits of its content key."""
TRY_ID = Annotated[str, Path(pattern=TRY_ID_PATTERN, description="the try run's id")]


def try_service(request: Request) -> TryService:
    """The app's try service; 404 while try runs are off."""
    service = getattr(request.app.state, "tryrun", None)
    if service is None:
        raise HTTPException(404, OFF)
    return service


ServiceDep = Annotated[TryService, Depends(try_service)]


def refused(exc: Refused) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return HTTPException(exc.status, exc.detail, headers=headers)


async def try_caller(service: ServiceDep, authorization: Annotated[str | None, Header()] = None) -> Caller:
    """Who asks (before the body is read): 401 without a usable token unless anonymous compiles are allowed."""
    try:
        return await run_in_threadpool(service.caller, authorization)
    except Refused as exc:
        raise refused(exc) from None


CallerDep = Annotated[Caller, Depends(try_caller)]


def checked_unit(service: TryService, body: TryIn) -> Unit:
    """The body as a unit, or 422 naming every field that is wrong."""
    s = service.settings
    try:
        return build_unit(body, s.try_max_source_bytes, s.try_max_targets, s.try_max_timeout_s)
    except Invalid as exc:
        raise HTTPException(422, [p.to_dict() for p in exc.problems]) from None


def admit(service: TryService, unit: Unit, caller: Caller) -> Submitted:
    """`service.submit`, its refusals as 429 (with Retry-After) or 403."""
    try:
        return service.submit(unit, caller)
    except QuotaExceeded as exc:
        r = exc.refusal
        raise HTTPException(
            r.status, r.detail, headers={"Retry-After": str(r.retry_after_s)} if r.retry_after_s else None
        ) from None
    except PoolFull as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from None


def body_limit(service: TryService) -> int:
    """Bytes a request body may have: twice the source limit (JSON escapes) and room for the other fields."""
    return 2 * service.settings.try_max_source_bytes + 64 * 1024


async def read_body(request: Request, service: TryService) -> TryIn:
    """The body, read only after the token was checked, refused (413) past `body_limit`, as a `TryIn` (422 naming
    the field otherwise)."""
    raw = await read_capped(request, body_limit(service))
    try:
        return TryIn.model_validate_json(raw)
    except ValidationError as exc:
        detail = [{"loc": ["body", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        raise HTTPException(422, detail or "not a JSON object") from None


@router.post(
    "/try",
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": TryIn.model_json_schema()}}}},
    responses={
        200: {"description": "Server-Sent Events: queued, compiling, running, done (or JSON with Accept: application/json)"},
        401: {"description": "no token, or an unknown one (anonymous compiles are off)"},
        403: {"description": "a revoked token, or a run that can never fit its quota"},
        404: {"description": "try runs are off on this server"},
        413: {"description": "the body is longer than twice the source limit"},
        422: {"description": "a field is wrong: `loc` names it"},
        429: {"description": "a quota is used up, or the pool is full: Retry-After says when to ask again"},
    },
)
async def post_try(request: Request, service: ServiceDep, caller: CallerDep) -> Response:
    """Build (and run, where a GPU can) `source` as a block of `lang` with `attributes`, for `targets`, through the
    runner's sandbox and checks. The answer streams its progress; the same content asked again answers from the
    stored result. A try result is never page evidence."""
    body = await read_body(request, service)
    unit = checked_unit(service, body)
    submitted = await run_in_threadpool(admit, service, unit, caller)
    row = submitted.row
    cached = not submitted.fresh and row.state == "done"
    headers = {"Location": f"/api/try/{row.id}", "X-Try-Id": row.id, "Cache-Control": "no-store"}
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        done = await wait_done(service.results, row.id)
        if done is None:
            return JSONResponse(public_row(row), status_code=202, headers=headers)
        return JSONResponse({**done, "cached": cached}, headers=headers)
    return StreamingResponse(
        progress(service.results, row.id, cached),
        media_type="text/event-stream",
        headers={**headers, "X-Accel-Buffering": "no"},
    )


@router.get("/try/{try_id}", responses={404: {"description": "no such try run, or try runs are off"}})
def get_try(service: ServiceDep, try_id: TRY_ID) -> JSONResponse:
    """A try run: its source, attributes, targets, progress events and, once done, its record (evidence-shaped
    records of every step, SASS, output, metrics). Not page evidence."""
    row = service.results.get(try_id)
    if row is None:
        raise HTTPException(404, f"no try run '{try_id}'")
    return JSONResponse(public_row(row), headers={"Cache-Control": "no-store"})


@router.post(
    "/try/{try_id}/events",
    dependencies=[Depends(require_runner_token)],
    responses={401: {"description": "no runner token"}, 404: {"description": "no such try run"}},
)
async def post_try_event(request: Request, service: ServiceDep, try_id: TRY_ID) -> JSONResponse:
    """A GPU worker's progress on a try run of the queue (`compiling`, `running`) and its result (`done`), with
    the runner token. Stored as the try result, never as evidence."""
    raw = await read_capped(request, service.settings.evidence_max_body_bytes)
    try:
        body = parse_json(raw)  # the evidence API's rule: deep nesting is a 422, never a RecursionError
    except JSONProblem as exc:
        raise HTTPException(422, [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]) from None
    event = body.get("event") if isinstance(body, dict) else None
    if event not in ("compiling", "running", "done"):
        raise HTTPException(422, [{"loc": ["body", "event"], "msg": "one of compiling, running, done", "type": "value_error"}])
    row = await run_in_threadpool(service.results.get, try_id)
    if row is None:
        raise HTTPException(404, f"no try run '{try_id}'")
    if row.state == "done":
        return JSONResponse({"id": try_id, "stored": False, "detail": "already done"})
    if event == "done":
        result = body.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("records"), list) or "status" not in result:
            raise HTTPException(422, [{"loc": ["body", "result"], "msg": "the finished try record", "type": "value_error"}])
        result["id"] = try_id
        await run_in_threadpool(service.results.finish, try_id, result)
    else:
        data = body.get("data") if isinstance(body.get("data"), dict) else {}
        await run_in_threadpool(service.results.add_event, try_id, event, {"target": str(data.get("target", ""))[:32]})
    return JSONResponse({"id": try_id, "stored": True})
