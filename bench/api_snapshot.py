"""A recorded set of requests to the service, answered into one JSON file: compare two trees' answers byte for byte.

    .venv/bin/python bench/api_snapshot.py --out /tmp/api-before.json     # on one tree
    .venv/bin/python bench/api_snapshot.py --out /tmp/api-after.json      # on another
    diff /tmp/api-before.json /tmp/api-after.json                          # empty: the same answers

It indexes the bundled wiki/ and evidence/ into a fresh SQLite file, serves the app in-process (Starlette's
TestClient: no socket, no port), issues the requests of REQUESTS in order, and writes each answer's status,
content type and body. Volatile values are replaced by a placeholder (VOLATILE): timings, clock times and the
temporary folder's path; everything else is kept as served. Not a benchmark: it times nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: the checkout's app/, not an installed one
    sys.path.insert(0, str(REPO))

BASE = "http://127.0.0.1:8000"
PAGE = "hw-tmem"
SNIPPET_PAGE = "pattern-bank-conflicts"

REQUESTS: list[tuple[str, str, dict[str, Any] | None]] = [
    # (method, path and query, JSON body or None)
    ("GET", "/api/health", None),
    ("GET", "/api/pages", None),
    ("GET", "/api/pages?limit=5&offset=5", None),
    ("GET", "/api/pages?arch=sm_90a", None),
    ("GET", "/api/pages?type=pattern", None),
    ("GET", "/api/pages?tag=nonexistent-tag", None),
    ("GET", "/api/pages?arch=sm_7", None),
    ("GET", f"/api/pages/{PAGE}", None),
    ("GET", f"/api/pages/{SNIPPET_PAGE}", None),
    ("GET", "/api/pages/no-such-page", None),
    ("GET", "/api/resolve?name=tmem", None),
    ("GET", "/api/resolve?name=TMA", None),
    ("GET", "/api/resolve?name=zzz-unknown", None),
    ("GET", "/api/graph", None),
    ("GET", f"/api/graph?page={PAGE}&depth=1", None),
    ("GET", "/api/search?q=tmem", None),
    ("GET", "/api/search?q=bank+conflicts", None),
    ("GET", "/api/search?q=tensor+memory&limit=3", None),
    ("GET", "/api/search?q=wgmma&arch=sm_90a", None),
    ("GET", "/api/search?q=mbarrier&type=hardware", None),
    ("GET", "/api/search?q=%22shared+memory%22", None),
    ("GET", "/api/search?q=tesnor", None),
    ("GET", "/api/search?q=", None),
    ("GET", "/api/search?q=x&limit=0", None),
    ("GET", "/api/search?q=x&arch=bogus", None),
    ("GET", "/api/search?q=cluster&offset=2&limit=2", None),
    ("GET", "/api/snippets", None),
    ("GET", "/api/snippets?limit=5", None),
    ("GET", "/api/snippets?status=pass", None),
    ("GET", "/api/snippets?status=bogus", None),
    ("GET", f"/api/snippets/{SNIPPET_PAGE}:1/evidence", None),
    ("GET", f"/api/snippets/{SNIPPET_PAGE}:1/sass", None),
    ("GET", f"/api/snippets/{SNIPPET_PAGE}:1/ptx", None),
    ("GET", f"/api/snippets/{SNIPPET_PAGE}:1/matrix", None),
    ("GET", "/api/snippets/ghost:1/evidence", None),
    ("GET", "/api/changes", None),
    ("GET", "/api/performance-claims", None),
    ("GET", "/api/queries", None),
    ("GET", "/api/facets", None),
    ("POST", "/api/evidence", {"records": []}),
    ("GET", "/", None),
    ("GET", "/pages", None),
    ("GET", "/pages?arch=sm_100a", None),
    ("GET", f"/pages/{PAGE}", None),
    ("GET", f"/pages/{SNIPPET_PAGE}", None),
    ("GET", "/pages/no-such-page", None),
    ("GET", "/search?q=tmem", None),
    ("GET", "/search?q=tesnor+cores", None),
    ("GET", "/search?q=x&arch=bogus", None),
    ("GET", "/evidence", None),
    ("GET", "/graph", None),
    ("GET", "/a/tmem", None),
    ("GET", f"/snippets/{SNIPPET_PAGE}:1/sass", None),
    ("GET", "/changes", None),
    ("GET", "/performance-claims", None),
    ("GET", "/queries", None),
    ("GET", "/llms.txt", None),
    ("GET", "/llms-full.txt", None),
    ("GET", f"/pages/{PAGE}.md", None),
    ("GET", "/openapi.json", None),
    ("GET", "/docs", None),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
    (
        "POST",
        "/mcp",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "resolve", "arguments": {"name": "tmem"}}},
    ),
    (
        "POST",
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "bank conflicts"}},
        },
    ),
]
"""Each request once, in this order (answers that depend on earlier ones, such as a cache, stay the same)."""

VOLATILE = "<volatile>"
_VOLATILE_KEYS = {"took_ms"}
"""JSON keys whose values are timings of this run (recorded evidence keeps its own times and durations)."""
_CLOCK = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def _normalise_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (VOLATILE if k in _VOLATILE_KEYS and isinstance(v, float | int) else _normalise_json(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_normalise_json(v) for v in value]
    return value


def _normalise_text(text: str, tmp: str) -> str:
    text = text.replace(tmp, "<tmp>")
    return re.sub(r"· \d+(?:\.\d+)? ms<", "· <volatile> ms<", text)  # the HTML search page's timing


def snapshot(out: Path) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app, prepare_store
    from app.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="kw-snapshot-"))
    try:
        wiki = tmp / "wiki"
        evidence = tmp / "evidence"
        shutil.copytree(REPO / "wiki", wiki)
        shutil.copytree(REPO / "evidence", evidence)
        settings = Settings(
            wiki=wiki,
            evidence=evidence,
            db=f"sqlite:///{tmp / 'index.db'}",
            runner_token=None,
            search_typo_budget_s=30.0,  # typo correction finishes however loaded the machine is
        )
        store = prepare_store(settings)
        answers: list[dict[str, Any]] = []
        with TestClient(create_app(settings, store=store), base_url=BASE) as client:
            for method, url, body in REQUESTS:
                headers = {"accept": "application/json, text/event-stream"} if url == "/mcp" else {}
                response = client.request(method, url, json=body, headers=headers)
                kind = response.headers.get("content-type", "")
                text = _normalise_text(response.text, str(tmp))
                answer: dict[str, Any] = {"request": f"{method} {url}", "status": response.status_code, "type": kind}
                if "json" in kind:
                    try:
                        answer["json"] = _normalise_json(json.loads(text))
                    except ValueError:
                        answer["text"] = text.splitlines()
                else:
                    answer["text"] = text.splitlines()  # a line each: a difference shows where it is
                answers.append(answer)
        store.engine.dispose()
        out.write_text(json.dumps(answers, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{len(answers)} answers → {out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    snapshot(parser.parse_args().out)


if __name__ == "__main__":
    main()
