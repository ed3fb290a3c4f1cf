"""POST /api/try and GET /api/try/{id} over real HTTP: tokens, refusals naming the parameter, a real sandboxed build
on the local pool streamed as Server-Sent Events, and the stored answer for the same content."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from runner.sandbox import ISOLATION_BWRAP, isolation_problem
from runner.toolchain import discover_toolchain
from tests.tryrun.conftest import KERNEL, PROGRAM, TryClient, events_of, serve, try_settings

PYTHON = "print('hello')\n"


def _needs_bwrap_and_nvcc() -> None:
    problem = isolation_problem(ISOLATION_BWRAP)
    if problem:
        pytest.skip(f"bubblewrap unusable here: {problem}")
    if not discover_toolchain().nvcc:
        pytest.skip("no nvcc here")


def test_try_runs_are_off_unless_the_operator_turns_them_on(live) -> None:  # type: ignore[no-untyped-def]
    answer = live.post("/api/try", json={"source": KERNEL, "lang": "cuda", "targets": ["sm_90a"]})
    assert answer.status_code == 404
    assert "kernelwiki serve --try" in answer.json()["error"]["detail"] and "KERNELWIKI_TRY=1" in answer.json()["error"]["detail"]
    assert live.get("/try", headers={"Accept": "text/html"}).status_code == 404
    assert live.get("/api/try/" + "0" * 24).status_code == 404
    page = live.get("/pages/hw-tma", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "Edit &amp; run" not in page.text


def test_a_request_without_a_usable_token_is_refused_naming_the_authorization_header(tried: TryClient) -> None:
    body = {"source": KERNEL, "lang": "cuda", "targets": ["sm_90a"]}
    none = tried.post(body)
    assert none.status_code == 401 and none.headers["WWW-Authenticate"] == "Bearer"
    assert none.json()["error"]["detail"].startswith("Authorization: try runs need an API token")
    assert tried.post(body, token="kwt_not-a-real-token").json()["error"]["detail"] == "Authorization: unknown API token"
    runner = tried.post(body, token="test-runner-token")  # the runner token is not an API token
    assert runner.status_code == 401 and "not a kernelwiki API token" in runner.json()["error"]["detail"]
    token = tried.token("mallory")
    from app.tryrun.tokens import revoke_token

    assert revoke_token(tried.service.engine, "mallory")
    revoked = tried.post(body, token=token)
    assert revoked.status_code == 403 and "the token 'mallory' was revoked" in revoked.json()["error"]["detail"]


def test_bad_fields_are_422s_each_naming_its_parameter(tried: TryClient) -> None:
    token = tried.token("alice")

    def problems(**body: object) -> dict[str, str]:
        answer = tried.post({"source": KERNEL, "lang": "cuda", "targets": ["sm_90a"], **body}, token)
        assert answer.status_code == 422, answer.text
        return {p["loc"][-1]: p["msg"] for p in answer.json()["error"]["detail"]}

    assert "not a language of snippets" in problems(lang="rust")["lang"]
    assert "unknown target 'sm_999'" in problems(targets=["sm_999"])["targets"]
    assert "name at least one target" in problems(targets=[])["targets"]
    assert "flags=: '-DX=$(id)' is not allowed" in problems(attributes='flags="-DX=$(id)"')["attributes"]
    assert "unknown attribute 'bogus'" in problems(attributes="compile bogus")["attributes"]
    assert "RE2 cannot take this pattern" in problems(attributes={"sass": ["(?=x)"]})["attributes"]
    assert "longer than a try run may hold a GPU (30 s)" in problems(source=PROGRAM, attributes="run timeout=120")["attributes"]
    assert "more than this server's limit of 65536" in problems(source="x" * 70_000)["source"]
    assert "arch= and targets both" in problems(attributes="arch=sm_90a")["attributes"]
    missing = tried.post({"lang": "cuda"}, token)  # pydantic's own validation: the same shape, the field named
    assert missing.status_code == 422 and missing.json()["error"]["detail"][0]["loc"] == ["body", "source"]
    huge = tried.http.post("/api/try", content=b"x" * 400_000, headers={"Authorization": f"Bearer {token}"})
    assert huge.status_code == 413 and "may not exceed 196608 bytes" in huge.json()["error"]["detail"]
    anonymous_huge = tried.http.post("/api/try", content=b"x" * 400_000)  # the token is checked before the body is read
    assert anonymous_huge.status_code == 401
    with tried.service.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM try_result")).scalar() == 0  # nothing was admitted


def test_a_cuda_program_is_built_in_the_sandbox_streamed_in_order_and_answered_again_from_the_store(tried: TryClient) -> None:
    _needs_bwrap_and_nvcc()
    token = tried.token("alice")
    body = {"source": PROGRAM, "lang": "cuda", "targets": ["sm_90a"], "attributes": "run", "snippet_id": "hw-tma:1"}
    answer = tried.post(body, token)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    events = events_of(answer)
    assert [name for name, _ in events] == ["queued", "compiling", "done"]  # no GPU here: nothing runs
    assert events[1][1]["target"] == "sm_90a"
    done = events[-1][1]
    assert done["cached"] is False
    run = done["run"]
    result = run["result"]
    steps = {(r["target"], r["step"]): r for r in result["records"]}
    assert steps["sm_90a", "compile"]["status"] == "pass" and steps["sm_90a", "compile"]["isolation"] == "bwrap"
    assert "-arch=sm_90a" in steps["sm_90a", "compile"]["command"] or "sm_90a" in steps["sm_90a", "compile"]["command"]
    assert steps["sm_90a", "run"]["status"] == "skipped"
    assert steps["sm_90a", "run"]["message"] == "not run: no GPU on this server: built only, nothing was run"
    assert result["compile_only"] == "no GPU on this server: built only, nothing was run"
    assert "k" in result["sass"]["sm_90a"] and result["isolation"] == "bwrap"
    assert {r["page_id"] for r in result["records"]} == {"try"}
    assert {r["snippet_id"] for r in result["records"]} == {f"try:{run['id']}"}
    assert "not page evidence" in result["not_evidence"]
    assert answer.headers["X-Try-Id"] == run["id"]
    # stored as a try result, never as evidence
    with tried.service.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM evidence WHERE page_id = 'try'")).scalar() == 0
        stored = conn.execute(text("SELECT token_name, snippet_id, state FROM try_result")).all()
    assert [tuple(r) for r in stored] == [("alice", "hw-tma:1", "done")]
    # the same content again: only `done`, from the store, at once
    started = time.monotonic()
    again = tried.post(body, token)
    assert time.monotonic() - started < 5
    assert [(n, d["cached"]) for n, d in events_of(again)] == [("done", True)]
    assert events_of(again)[0][1]["run"]["result"] == result
    # JSON and the share page
    got = tried.http.get(f"/api/try/{run['id']}").json()
    assert got["state"] == "done" and got["result"]["status"] == result["status"] and got["url"] == f"/try/{run['id']}"
    assert [e["event"] for e in got["events"]] == ["queued", "compiling", "done"]
    share = tried.http.get(f"/try/{run['id']}", headers={"Accept": "text/html"})
    assert share.status_code == 200 and "Compile-only:" in share.text and "not page evidence" in share.text
    assert "https://godbolt.org/clientstate/" in share.text
    # Accept: application/json waits and answers the run itself
    as_json = tried.post(body, token, accept="application/json")
    assert as_json.status_code == 200 and as_json.json()["cached"] is True and as_json.json()["id"] == run["id"]


def test_a_hostile_source_stays_in_the_sandbox_like_a_page_snippet(tried: TryClient, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _needs_bwrap_and_nvcc()
    secret = "KW-TRY-RUNNER-TOKEN-7d1e"
    monkeypatch.setenv("KERNELWIKI_RUNNER_TOKEN", secret)  # in the service's process, as on a real host
    canary = tmp_path / "secret" / "canary.txt"
    canary.parent.mkdir(mode=0o700)
    canary.write_text("KW-TRY-CANARY-ROOT-ONLY\n")
    canary.chmod(0o600)
    token = tried.token("eve")
    source = (
        f'#include "/etc/shadow"\n#include "{canary}"\n#include "/proc/self/environ"\n'
        "__global__ void k() {}\nint main() { return 0; }\n"
    )
    answer = tried.post({"source": source, "lang": "cuda", "targets": ["sm_90a"], "attributes": "run"}, token)
    done = events_of(answer)[-1][1]
    compile_step = next(r for r in done["run"]["result"]["records"] if r["step"] == "compile")
    assert compile_step["status"] == "fail" and compile_step["error_kind"] == "outside the sandbox"
    shadow = Path("/etc/shadow").read_text() if Path("/etc/shadow").exists() else ""
    stored = json.dumps(tried.http.get(f"/api/try/{done['id']}").json())
    for text_ in (answer.text, stored):
        assert secret not in text_ and "KW-TRY-CANARY-ROOT-ONLY" not in text_
        assert not any(line in text_ for line in shadow.splitlines() if ":$" in line)  # no password hash
    # the fence's attributes cannot reach a shell either: refused before anything runs
    flags = tried.post(
        {"source": KERNEL, "lang": "cuda", "targets": ["sm_90a"], "attributes": 'flags="-DX=$(cat${IFS}/etc/shadow)"'}, token
    )
    assert flags.status_code == 422 and flags.json()["error"]["detail"][0]["loc"] == ["body", "attributes"]


def test_the_hourly_quota_refuses_with_retry_after_and_says_when_it_refills(tried: TryClient) -> None:
    _needs_bwrap_and_nvcc()
    token = tried.token("bob", compiles_per_hour=1)
    first = tried.post({"source": PYTHON, "lang": "python", "targets": ["any"]}, token)
    assert events_of(first)[-1][0] == "done"
    second = tried.post({"source": "print('other')\n", "lang": "python", "targets": ["any"]}, token)
    assert second.status_code == 429
    wait = int(second.headers["Retry-After"])
    assert 3500 <= wait <= 3600
    detail = second.json()["error"]["detail"]
    assert "token 'bob' started 1 try runs in the last hour, the most allowed is 1" in detail
    assert "the next one is allowed at 20" in detail and f"(in {wait} s)" in detail
    again = tried.post({"source": PYTHON, "lang": "python", "targets": ["any"]}, token)  # stored: costs nothing
    assert again.status_code == 200 and events_of(again)[-1][1]["cached"] is True
    zero = tried.token("nobody", compiles_per_hour=0)
    refused = tried.post({"source": PYTHON, "lang": "python", "targets": ["any"]}, zero)
    assert refused.status_code == 200  # the same content is answered from the store, whoever asks
    other = tried.post({"source": "print(3)\n", "lang": "python", "targets": ["any"]}, zero)
    assert other.status_code == 403 and "the quota is 0 runs per hour" in other.json()["error"]["detail"]


def test_a_full_pool_refuses_with_retry_after(tried: TryClient) -> None:
    token = tried.token("carol")
    pool = tried.service.dispatcher
    taken = 0
    try:
        while True:  # take every place the pool has
            pool.reserve()
            taken += 1
    except Exception as exc:  # noqa: BLE001 - PoolFull
        assert "the try pool is full" in str(exc)
    try:
        answer = tried.post({"source": "print(4)\n", "lang": "python", "targets": ["any"]}, token)
        assert answer.status_code == 429 and answer.headers["Retry-After"] == "10"
        assert f"the try pool is full ({taken} try runs" in answer.json()["error"]["detail"]
    finally:
        for _ in range(taken):
            pool.release()


def test_anonymous_callers_compile_only_where_the_operator_allows_it(tmp_path: Path, wiki_dir: Path) -> None:
    _needs_bwrap_and_nvcc()
    with serve(try_settings(tmp_path, wiki_dir, try_anonymous=True, try_anonymous_compiles_per_hour=1)) as client:
        answer = client.post({"source": "int main() { return 0; }\n", "lang": "cpp", "targets": ["any"]})
        result = events_of(answer)[-1][1]["run"]["result"]
        assert result["compile_only"] == "anonymous callers may only compile (a token runs programs)"
        run_step = next(r for r in result["records"] if r["step"] == "run")
        assert run_step["status"] == "skipped" and "anonymous callers may only compile" in run_step["message"]
        more = client.post({"source": "int main() { return 1; }\n", "lang": "cpp", "targets": ["any"]})
        assert more.status_code == 429 and "anonymous callers started 1 try runs" in more.json()["error"]["detail"]
