"""POST /api/evidence over real HTTP: the token first, bounded records, parsed times, refusals that name what is wrong."""

from __future__ import annotations

import base64
import io
import json
import socket
from typing import Any

import pytest

from tests.app.evidence_records import tma_record

AUTH = {"Authorization": "Bearer test-runner-token"}


def rec(**change: Any) -> dict[str, Any]:
    """A well-formed record for the fixture wiki's one snippet (hw-tma:1), with its toolchain named."""
    return tma_record(**{"toolchain": "nvcc 13.0.88", **change})


def detail(response: Any) -> str:
    return json.dumps(response.json()["error"]["detail"])


def test_only_a_bearer_token_is_accepted(live) -> None:
    for headers in (
        {},
        {"Authorization": "test-runner-token"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic dGVzdC1ydW5uZXItdG9rZW4="},
        {"Authorization": "Bearer  x"},
    ):
        response = live.post("/api/evidence", json=[rec()], headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"] == "Bearer"
    assert live.post("/api/evidence", json=[rec()], headers=AUTH).json()["inserted"] == 1


def test_the_token_is_checked_before_the_body_is_read(shared_live) -> None:
    """An unauthenticated client declaring 100 MB is answered 401 after sending a few bytes of it."""
    live = shared_live  # refused or read only: one server per backend for the module
    answer = raw_post(live, b"Content-Length: 104857600\r\n", b"[" * 1000)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:100]


def raw_post(live: Any, head: bytes, body: bytes) -> bytes:
    """Send a request's head and the start of its body over a plain socket; the first bytes of the answer."""
    host, port = live.server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + head + b"\r\n" + body)
        return sock.recv(4096)


def test_a_body_over_the_cap_is_refused_while_it_streams(shared_live) -> None:
    live = shared_live  # refused or read only: one server per backend for the module
    declared = raw_post(live, b"Authorization: Bearer test-runner-token\r\nContent-Length: 9437184\r\n", b"[")
    assert declared.startswith(b"HTTP/1.1 413")  # the declared length alone is enough

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b" " * (256 * 1024)

    streamed = live.post("/api/evidence", content=chunks(), headers={**AUTH, "content-type": "application/json"})
    assert streamed.status_code == 413 and "8388608 bytes" in detail(streamed)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"timestamp": "zzzz-not-a-date"}, "timestamp"),
        ({"timestamp": "2026-12-01T00:00:00"}, "timestamp"),  # no time zone
        ({"timestamp": 1764547200}, "timestamp"),  # a number is not RFC 3339
        ({"timestamp": "2999-01-01T00:00:00Z"}, "in the future"),  # would stay 'newest' forever
        ({"status": "great"}, "status"),
        ({"step": "bake"}, "step"),
        ({"record_id": "x" * 500}, "record_id"),
        ({"snippet_id": ""}, "snippet_id"),
        ({"checks": [{"detail": "x" * 20000}]}, "checks"),
        ({"duration_s": -1}, "duration_s"),
    ],
)
def test_malformed_records_are_refused_whole_with_the_field_named(shared_live, change: dict[str, Any], named: str) -> None:
    live = shared_live  # refused or read only: one server per backend for the module
    response = live.post(
        "/api/evidence",
        json=[rec(record_id="good"), rec(record_id="bad", **change)]
        if "record_id" not in change
        else [rec(record_id="good"), rec(**change)],
        headers=AUTH,
    )
    assert response.status_code == 422 and named in detail(response) and "record 1" in detail(response)
    assert live.get("/api/snippets/hw-tma:1/evidence").json()["records"] == []  # nothing of the post was stored


def test_unknown_snippets_and_wrong_pages_are_refused_by_name(shared_live) -> None:
    live = shared_live  # refused or read only: one server per backend for the module
    response = live.post(
        "/api/evidence", json=[rec(snippet_id="nope:7", page_id="nope"), rec(record_id="r2", page_id="hw-tmem")], headers=AUTH
    )
    assert response.status_code == 422
    text = detail(response)
    assert "no snippet 'nope:7'" in text and "snippet 'hw-tma:1' is on page 'hw-tma', not 'hw-tmem'" in text
    bad_json = live.post("/api/evidence", content=b"{not json", headers={**AUTH, "content-type": "application/json"})
    assert bad_json.status_code == 422 and "not JSON" in detail(bad_json)
    assert live.post("/api/evidence", json={"record_id": "r1"}, headers=AUTH).status_code == 422  # not an array


def test_evidence_import_refuses_what_post_refuses_naming_the_file_and_line(live, settings, tmp_path) -> None:
    """One acceptance rule: `kernelwiki evidence import` refuses a record dated 2999 and one for a snippet the index
    lacks (or puts on another page), each named by file and line, and stores the good lines; POST refuses the same."""
    from typer.testing import CliRunner

    from app.cli.main import cli

    far = rec(record_id="far", timestamp="2999-01-01T00:00:00Z")
    ghost = rec(record_id="ghost", snippet_id="ghost:1", page_id="ghost")
    elsewhere = rec(record_id="elsewhere", page_id="hw-tmem")
    for bad, why in ((far, "is in the future"), (ghost, "no snippet 'ghost:1'"), (elsewhere, "is on page 'hw-tma'")):
        response = live.post("/api/evidence", json=[bad], headers=AUTH)
        assert response.status_code == 422 and why in detail(response)
    jsonl = tmp_path / "mixed.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in (rec(record_id="fine"), far, ghost, elsewhere)) + "\n")
    result = CliRunner().invoke(cli, ["evidence", "import", str(jsonl), "--wiki", str(settings.wiki), "--db", settings.db])
    said = "".join(result.output.split())  # as printed, less the console's wrapping (it may break a long path)
    assert result.exit_code == 1, result.output
    for line in (
        f"{jsonl}:2: error: field 'timestamp': 2999-01-01",
        f"{jsonl}:3: error: no snippet 'ghost:1' in the index",
        f"{jsonl}:4: error: snippet 'hw-tma:1' is on page 'hw-tma', not 'hw-tmem'",
        "1 new, 0 already present, 3 rejected",
    ):
        assert "".join(line.split()) in said, line
    ids = [r["record_id"] for r in live.get("/api/snippets/hw-tma:1/evidence").json()["records"]]
    assert ids == ["fine"]  # the good line was stored, none of the refused ones


def test_long_output_keeps_head_and_tail_and_long_messages_are_cut(live) -> None:
    lines = "".join(f"line {i}\n" for i in range(200_000))  # ~1.5 MB
    one_line = "z" * 300_000
    records = [rec(output=lines, message="m" * 10_000), rec(record_id="r2", target="sm_100a", output=one_line)]
    assert live.post("/api/evidence", json=records, headers=AUTH).json()["inserted"] == 2
    stored = {r["target"]: r["data"] for r in live.get("/api/snippets/hw-tma:1/evidence").json()["records"]}
    kept = stored["sm_90a"]["output"]
    assert len(kept.encode()) <= 64 * 1024 and kept.startswith("line 0\n") and kept.endswith("line 199999\n")
    assert "lines omitted]" in kept and stored["sm_90a"]["output_truncated"] is True
    assert len(stored["sm_90a"]["message"].encode()) <= 4 * 1024 and "bytes omitted]" in stored["sm_90a"]["message"]
    assert len(stored["sm_100a"]["output"].encode()) <= 64 * 1024 and "bytes omitted]" in stored["sm_100a"]["output"]


def test_records_are_ordered_by_parsed_time_and_the_receive_time_is_kept(live) -> None:
    # 10:00+02:00 is 08:00 UTC: earlier than 09:00Z although its text sorts later.
    early_fail = rec(record_id="early", status="fail", timestamp="2026-12-01T10:00:00+02:00")
    late_pass = rec(record_id="late", status="pass", timestamp="2026-12-01T09:00:00Z")
    assert live.post("/api/evidence", json=[late_pass, early_fail], headers=AUTH).status_code == 200
    history = live.get("/api/snippets/hw-tma:1/evidence").json()["records"]
    assert [r["record_id"] for r in history] == ["late", "early"]
    assert history[1]["timestamp"] == "2026-12-01T08:00:00.000000Z"
    out = io.StringIO()
    live.server.server.config.app.state.store.evidence.export_jsonl(out)
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["record_id"] for r in exported] == ["early", "late"] and all(r["received_at"].startswith("20") for r in exported)


def test_the_openapi_schema_shows_the_record_model_and_the_bearer_scheme(shared_live) -> None:
    live = shared_live  # refused or read only: one server per backend for the module
    spec = live.get("/openapi.json").json()
    post = spec["paths"]["/api/evidence"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert schema["type"] == "array" and schema["maxItems"] == 5000
    props = schema["items"]["properties"]
    assert props["timestamp"]["format"] == "date-time" and props["record_id"]["maxLength"] == 128
    assert set(schema["items"]["required"]) >= {
        "record_id",
        "snippet_id",
        "page_id",
        "target",
        "step",
        "status",
        "content_hash",
        "timestamp",
    }
    assert {"401", "413", "422"} <= set(post["responses"])
    assert post["security"] == [{"HTTPBearer": []}] and spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_the_documented_error_shape_is_the_one_the_service_answers(shared_live) -> None:
    live = shared_live  # refused or read only: one server per backend for the module
    from app.schemas import ErrorAnswer

    spec = live.get("/openapi.json").json()
    documented = spec["paths"]["/api/evidence"]["post"]["responses"]["401"]["content"]["application/json"]["schema"]
    assert documented == {"$ref": "#/components/schemas/ErrorAnswer"}
    assert spec["components"]["schemas"]["ErrorAnswer"]["required"] == ["error"]
    answer = live.post("/api/evidence", json=[rec()]).json()
    assert ErrorAnswer.model_validate(answer).error.status == 401


def test_a_snippets_history_comes_newest_first_a_window_at_a_time_following_next(live) -> None:
    from app.evidence.store import HISTORY_LIMIT, HISTORY_MAX_LIMIT

    # 45 records, three per second (equal times are ordered by record id), posted out of order.
    records = [
        rec(record_id=f"h{n:02d}", timestamp=f"2026-12-01T00:00:{n // 3:02d}Z", output="x" * 2000) for n in reversed(range(45))
    ]
    assert live.post("/api/evidence", json=records, headers=AUTH).json()["inserted"] == 45
    first = live.get("/api/snippets/hw-tma:1/evidence").json()
    assert first["snippet_id"] == "hw-tma:1" and first["total"] == 45 and first["limit"] == HISTORY_LIMIT
    assert len(first["records"]) == HISTORY_LIMIT  # never the whole history unasked

    seen: list[str] = []
    query = "limit=7"
    windows = 0
    while query:
        body = live.get(f"/api/snippets/hw-tma:1/evidence?{query}").json()
        assert len(body["records"]) <= 7 and body["total"] == 45 + (1 if windows >= 2 else 0)
        seen += [r["record_id"] for r in body["records"]]
        windows += 1
        if windows == 2:  # a record arriving mid-walk is newer: it neither shifts nor repeats the windows still to come
            assert (
                live.post(
                    "/api/evidence", json=[rec(record_id="new", timestamp="2026-12-02T00:00:00Z")], headers=AUTH
                ).status_code
                == 200
            )
        query = body["next"]
    assert windows == 7 and seen == [f"h{n:02d}" for n in reversed(range(45))]

    too_many = live.get("/api/snippets/hw-tma:1/evidence", params={"limit": HISTORY_MAX_LIMIT + 1})
    assert too_many.status_code == 422 and "limit" in detail(too_many)
    deep = base64.urlsafe_b64encode(b"[" * 1490).decode()  # nested past json's recursion limit, under the length cap
    for token in ("nonsense!", "WzFd", "eyJhIjogMX0", "x" * 3000, deep):
        bad = live.get("/api/snippets/hw-tma:1/evidence", params={"next": token})
        assert bad.status_code == 422 and "next" in detail(bad), token
    assert live.get("/api/snippets/hw-tma:99/evidence").status_code == 404


def test_json_nested_too_deep_is_refused_with_422_naming_the_limit(live, tmp_path) -> None:
    from app.evidence.ingest import MAX_NESTING

    too_deep = f"arrays and objects are nested deeper than {MAX_NESTING} levels"
    for depth in (1100, 100_000):  # past the JSON decoder's own recursion limit
        body = b"[" * depth + b"]" * depth
        response = live.post("/api/evidence", content=body, headers={**AUTH, "content-type": "application/json"})
        assert response.status_code == 422 and too_deep in detail(response), depth
    # Within the decoder's reach but past the limit: a record whose `checks` hide a deep value.
    hidden: Any = "x"
    for _ in range(MAX_NESTING):
        hidden = [hidden]
    response = live.post("/api/evidence", json=[rec(checks=[{"ptx": hidden}])], headers=AUTH)
    assert response.status_code == 422 and too_deep in detail(response)
    shallow = rec(record_id="shallow", checks=[{"kind": "ptx", "pattern": "x", "passed": True, "detail": ["a", {"b": 1}]}])
    assert live.post("/api/evidence", json=[shallow], headers=AUTH).json()["inserted"] == 1
    assert live.get("/api/health").status_code == 200  # and the service is none the worse

    # The same rule for committed evidence: the line is named, the rest of the file is imported.
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text(json.dumps(rec(record_id="fine")) + "\n" + "[" * 5000 + "]" * 5000 + "\n")
    result = live.server.server.config.app.state.store.evidence.import_jsonl(jsonl)
    assert result.inserted == 1 and result.errors == [f"{jsonl}:2: error: {too_deep}"]
