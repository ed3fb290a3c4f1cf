"""The service's evidence API as a GPU worker uses it, over httpx: a snippet's history, and posting records.

Every call has the worker's timeout; reading is anonymous, posting carries
the runner token. Anything but the expected answer is a `ServiceError`, so the
queue retries the job.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import httpx

ERROR_TEXT_LIMIT = 500
"""Characters of an error answer's body quoted in a ServiceError."""


class ServiceError(Exception):
    """The service did not accept a request (the job is retried)."""


class EvidenceRefused(ServiceError):
    """The service answered 422: it will never accept these records (their snippet left the index, or they are invalid).

    Retrying cannot help, unlike the other service errors."""


class EvidenceClient:
    """`GET /api/snippets/{id}/evidence` and `POST /api/evidence` with one connection pool per worker."""

    def __init__(self, base_url: str, token: str, timeout_s: float, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout_s, transport=transport, headers={"Accept": "application/json"}
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EvidenceClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._token}"} if method == "POST" else {}
        try:
            return self._http.request(method, path, json=body, headers=headers)
        except httpx.HTTPError as exc:  # refused, reset, timed out, bad URL
            raise ServiceError(f"{method} {self.base_url}{path}: {exc}") from exc

    @staticmethod
    def _json(response: httpx.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise ServiceError(f"{what}: the answer is not JSON: {response.text[:ERROR_TEXT_LIMIT]}") from exc

    def history(self, snippet_id: str) -> list[dict[str, Any]] | None:
        """Every evidence record of a snippet, newest first, window after window (None: the index has no such snippet)."""
        what = f"evidence history of {snippet_id}"
        path = f"/api/snippets/{urllib.parse.quote(snippet_id, safe='')}/evidence"
        records: list[dict[str, Any]] = []
        query: str | None = ""
        seen: set[str] = set()
        while query is not None:
            response = self._request("GET", f"{path}?{query}" if query else path)
            if response.status_code == 404 and not query:
                return None
            if response.status_code != 200:
                raise ServiceError(f"{what}: HTTP {response.status_code}: {response.text[:ERROR_TEXT_LIMIT]}")
            body = self._json(response, what)
            if not isinstance(body, dict) or not isinstance(body.get("records"), list):
                raise ServiceError(f"{what}: not a window of records: {response.text[:ERROR_TEXT_LIMIT]}")
            records += body["records"]
            seen.add(query)
            query = body.get("next")
            if query in seen:
                raise ServiceError(f"{what}: the service answered the same `next` twice: {query[:ERROR_TEXT_LIMIT]}")
        return records

    def post_matrix(self, body: dict[str, Any]) -> dict[str, Any]:
        """Post a matrix job's cells and listings (`POST /api/matrix/cells`); the answer (`inserted`, `replaced`, `kept`)."""
        what = "POST /api/matrix/cells"
        response = self._request("POST", "/api/matrix/cells", body)
        if response.status_code == 422:
            raise EvidenceRefused(f"{what}: HTTP 422: {response.text[:ERROR_TEXT_LIMIT]}")
        if response.status_code != 200:
            raise ServiceError(f"{what}: HTTP {response.status_code}: {response.text[:ERROR_TEXT_LIMIT]}")
        return self._json(response, what)

    def post(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Post evidence records; the service's answer (`inserted`, `duplicates`)."""
        what = "POST /api/evidence"
        response = self._request("POST", "/api/evidence", records)
        if response.status_code == 422:
            raise EvidenceRefused(f"{what}: HTTP 422: {response.text[:ERROR_TEXT_LIMIT]}")
        if response.status_code != 200:
            raise ServiceError(f"{what}: HTTP {response.status_code}: {response.text[:ERROR_TEXT_LIMIT]}")
        return self._json(response, what)
