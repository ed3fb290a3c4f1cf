"""The worker's client of the evidence API: what each answer of the service becomes (httpx.MockTransport)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from app.queue.client import EvidenceClient, EvidenceRefused, ServiceError
from app.queue.job import Runtime

TOKEN = "runner-token"


def client_answering(handler: Callable[[httpx.Request], httpx.Response], seen: list[httpx.Request]) -> EvidenceClient:
    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return EvidenceClient("http://service.test/kw/", TOKEN, 5, transport=httpx.MockTransport(record))


def test_history_of_a_snippet_the_index_does_not_have_is_none() -> None:
    seen: list[httpx.Request] = []
    client = client_answering(lambda r: httpx.Response(404, json={"detail": "no snippet"}), seen)
    assert client.history("hw-tma:1") is None
    assert str(seen[0].url) == "http://service.test/kw/api/snippets/hw-tma%3A1/evidence"


def test_history_is_every_windows_records_read_without_the_token() -> None:
    seen: list[httpx.Request] = []
    records = [{"record_id": f"r{n}", "target": "sm_90a", "status": "pass", "stale": False, "data": {}} for n in range(3)]

    def windows(request: httpx.Request) -> httpx.Response:
        if not request.url.params.get("next"):
            return httpx.Response(200, json={"total": 3, "limit": 2, "next": "limit=2&next=TOKEN", "records": records[:2]})
        return httpx.Response(200, json={"total": 3, "limit": 2, "next": None, "records": records[2:]})

    client = client_answering(windows, seen)
    assert client.history("hw-tma:1") == records
    assert [str(r.url) for r in seen] == [
        "http://service.test/kw/api/snippets/hw-tma%3A1/evidence",
        "http://service.test/kw/api/snippets/hw-tma%3A1/evidence?limit=2&next=TOKEN",
    ]
    assert all(r.method == "GET" and "authorization" not in r.headers for r in seen)


@pytest.mark.parametrize("status", [401, 422, 500, 503])
def test_an_answer_other_than_200_is_a_service_error_quoting_it(status: int) -> None:
    client = client_answering(lambda r: httpx.Response(status, text=f"went wrong {status}"), [])
    with pytest.raises(ServiceError, match=f"HTTP {status}: went wrong {status}"):
        client.history("hw-tma:1")
    with pytest.raises(ServiceError, match=f"POST /api/evidence: HTTP {status}: went wrong {status}"):
        client.post([{"record_id": "r1"}])


def test_a_200_that_is_not_json_is_a_service_error() -> None:
    client = client_answering(lambda r: httpx.Response(200, text="<html>proxy page</html>"), [])
    with pytest.raises(ServiceError, match="not JSON: <html>proxy page"):
        client.post([{"record_id": "r1"}])


@pytest.mark.parametrize("error", [httpx.ConnectError("connection refused"), httpx.ReadTimeout("timed out")])
def test_a_connection_that_fails_is_a_service_error(error: httpx.HTTPError) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error

    client = client_answering(fail, [])
    with pytest.raises(ServiceError, match="GET http://service.test/kw/api/snippets/x/evidence: "):
        client.history("x")
    with pytest.raises(ServiceError, match="POST http://service.test/kw/api/evidence: "):
        client.post([])


def test_post_sends_the_records_as_json_with_the_runner_token() -> None:
    seen: list[httpx.Request] = []
    client = client_answering(lambda r: httpx.Response(200, json={"inserted": 1, "duplicates": 0}), seen)
    records = [{"record_id": "r1", "status": "pass"}]
    assert client.post(records) == {"inserted": 1, "duplicates": 0}
    request = seen[0]
    assert (request.method, str(request.url)) == ("POST", "http://service.test/kw/api/evidence")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == records


def test_a_422_is_a_refusal_that_retrying_cannot_change() -> None:
    client = client_answering(lambda r: httpx.Response(422, text="unknown snippet 'gone:1'"), [])
    with pytest.raises(EvidenceRefused, match="unknown snippet 'gone:1'"):
        client.post([{"record_id": "r1"}])


def test_a_job_whose_evidence_is_refused_ends_without_a_retry() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"total": 0, "limit": 20, "next": None, "records": []})
        return httpx.Response(422, text="unknown snippet 'gone:1'")

    record = {
        "snippet_id": "gone:1",
        "target": "sm_90a",
        "step": "compile",
        "status": "pass",
        "content_hash": "h",
        "toolchain": "nvcc 13.0.88",
    }
    runtime = Runtime(
        ["sm_90a"], "nvcc 13.0.88", client_answering(answer, []), lambda snippet, target, force: [dict(record)], "w1"
    )
    job = {"snippet_id": "gone:1", "target": "sm_90a", "content_hash": "h", "snippet": {}, "force": True}
    assert runtime.handle(7, 0, job).startswith("refused gone:1@sm_90a: POST /api/evidence: HTTP 422")
