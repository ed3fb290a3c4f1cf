"""`GET /api/health`: where the index stands (`indexing` with progress, `ok`, or `degraded` with the fix), and its counts.

200 while the service can answer (`indexing` included: it answers from the
index as it is; `degraded` with `stale: true` too: the wiki folder is gone and
the last index is served); 503 `degraded` when the index cannot be queried,
with the one line that names the file and the fix.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.deps import HealthDep
from app.errors import broken_index_line
from app.watch import IndexStatus, read_published, status_file

router = APIRouter(prefix="/api", tags=["health"])


@router.get(
    "/health", responses={503: {"description": "degraded: the index cannot be queried; `problem` says why and how to fix it"}}
)
def health(request: Request, counter: HealthDep) -> JSONResponse:
    state = request.app.state
    status: IndexStatus = state.index_status
    info: dict[str, Any] = status.as_dict()
    if state.settings.read_only:  # an extra worker: the supervising process indexes and publishes its status
        info = read_published(status_file(state.settings)) or info
    if (info["status"] != "degraded" or info.get("stale")) and counter is not None:
        try:
            counts = counter.counts()
        except Exception as exc:
            line = broken_index_line(state.settings.db, exc)
            if line is None:
                raise
            status.degrade(line)
            info = status.as_dict()
        else:
            counts.pop("status", None)
            info = {**counts, **info}
    info["read_only"] = state.settings.read_only  # true in the extra workers of `serve --workers N`
    broken = info["status"] == "degraded" and not info.get("stale")  # stale: the last index still answers
    return JSONResponse(info, status_code=503 if broken else 200)
