"""`kernelwiki serve` as a user runs it: a real process, a real port, real signals.

It listens at once and reports indexing progress, refuses a busy port and a
missing wiki clearly, names a damaged index and its fix, follows wiki edits
with --watch, serves with several workers, and stops within 5 s even while a
request is still running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.evidence_records import tma_record
from tests.conftest import free_port

KERNELWIKI = str(Path(sys.executable).parent / "kernelwiki")
TOKEN = "serve-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

PAGE = """---
id: {id}
title: {title}
type: concept
tags: [generated]
---
# {title}

Words about {word} and the tensor memory accelerator, page {n}.

## Details

More text so the page has a second section: {word} {word}.
"""


class Served:
    """`kernelwiki serve …` in its own process, output captured to files."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None, own_group: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out, self.err = cwd / "serve.out", cwd / "serve.err"
        full_env = {**os.environ, "KERNELWIKI_RUNNER_TOKEN": TOKEN, **(env or {})}
        full_env.pop("KERNELWIKI_WIKI", None)
        with self.out.open("w") as out, self.err.open("w") as err:  # the server writes to its own copies
            self.proc = subprocess.Popen(
                [KERNELWIKI, "serve", "--port", str(self.port), *args],
                cwd=cwd,
                env=full_env,
                stdout=out,
                stderr=err,
                start_new_session=own_group,  # a process group of its own, as a terminal's Ctrl-C reaches it
            )

    def listening(self, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                time.sleep(0.02)
        return False

    def health(self) -> httpx.Response:
        return httpx.get(self.url + "/api/health", timeout=10)

    def wait_ok(self, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.health().json()
            if body["status"] == "ok":
                return body
            time.sleep(0.05)
        raise AssertionError(f"not ok after {timeout}s: {body}")

    def stop(self) -> float:
        """SIGTERM; the seconds it took the process to exit."""
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return time.monotonic() - started

    def stderr(self) -> str:
        return self.err.read_text()


@pytest.fixture
def site(tmp_path: Path, wiki_dir: Path) -> Path:
    """A folder laid out like the repository: wiki/ (the fixture pages) and evidence/."""
    (tmp_path / "evidence").mkdir()
    assert wiki_dir == tmp_path / "wiki"
    return tmp_path


@pytest.fixture
def served(site: Path) -> Iterator[Served]:
    server = Served(site, "--db", f"sqlite:///{site / 'index.db'}")
    assert server.listening(), server.stderr()
    yield server
    server.stop()


def test_it_listens_at_once_and_health_reports_indexing_progress(site: Path) -> None:
    for n in range(1500):
        (site / "wiki" / f"gen-{n:04d}.md").write_text(
            PAGE.format(id=f"gen-{n:04d}", title=f"Generated {n}", word=f"word{n}", n=n)
        )
    server = Served(site, "--db", f"sqlite:///{site / 'index.db'}")
    try:
        assert server.listening(), server.stderr()
        first = server.health()
        assert first.status_code == 200
        body = first.json()
        assert body["status"] in ("starting", "indexing"), body  # answered before the first index is built
        deadline = time.monotonic() + 30
        while body["status"] == "starting" and time.monotonic() < deadline:  # counting the files: a moment under load
            time.sleep(0.02)
            body = server.health().json()
        assert body["status"] == "indexing", body  # answered while the first index is still being built
        assert body["indexing"]["files"] == 1504 and body["indexing"]["phase"] and body["indexing"]["elapsed_s"] >= 0
        early = httpx.post(server.url + "/api/evidence", json=[], headers=AUTH)  # snippets are not known yet: come back later
        assert early.status_code == 503 and early.headers["retry-after"] == "5"
        done = server.wait_ok()
        assert done["pages"] == 1504 and "indexing" not in done
        assert "serving http://127.0.0.1" in server.out.read_text()
    finally:
        server.stop()


def test_a_busy_port_is_one_clear_error_and_nothing_claims_to_serve(site: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [KERNELWIKI, "serve", "--port", str(port), "--db", f"sqlite:///{site / 'i.db'}"],
            cwd=site,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr and "--port" in result.stderr
    assert "serving" not in result.stdout and "Traceback" not in result.stderr


def test_outside_the_repository_it_refuses_to_serve_an_empty_site(tmp_path: Path) -> None:
    result = subprocess.run(
        [KERNELWIKI, "serve", "--port", str(free_port())], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "serving" not in result.stdout
    assert f"{tmp_path / 'wiki'}: error: no wiki folder here" in result.stderr and "--wiki DIR" in result.stderr


def test_an_empty_wiki_and_a_missing_evidence_folder_are_warned_about(tmp_path: Path) -> None:
    (tmp_path / "wiki").mkdir()
    server = Served(tmp_path, "--db", f"sqlite:///{tmp_path / 'index.db'}")
    try:
        assert server.listening(), server.stderr()
        assert server.wait_ok()["pages"] == 0
        err = server.stderr()
        assert f"{tmp_path / 'wiki'}: warning: the wiki folder has no Markdown pages" in err
        assert f"{tmp_path / 'evidence'}: warning: no evidence folder" in err
    finally:
        server.stop()


def _corrupt_table(db: Path, table: str) -> None:
    """Overwrite the first b-tree page of `table` with garbage (the rest of the file intact)."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    with db.open("r+b") as fh:
        fh.seek((root - 1) * size)
        fh.write(b"\xa5" * size)


def test_a_damaged_index_is_one_line_with_the_fix_and_rebuild_keeps_posted_evidence(site: Path) -> None:
    db = site / "index.db"
    server = Served(site, "--db", f"sqlite:///{db}")
    assert server.listening(), server.stderr()
    server.wait_ok()
    record = {
        "record_id": "posted-1",
        "snippet_id": "hw-tma:1",
        "page_id": "hw-tma",
        "target": "sm_90a",
        "step": "run",
        "status": "pass",
        "content_hash": "abc",
        "timestamp": "2026-12-01T00:00:00Z",
        "gpu_name": "NVIDIA H200",
    }
    assert httpx.post(server.url + "/api/evidence", json=[record], headers=AUTH).json()["inserted"] == 1
    server.stop()

    # Partial damage: the service starts, health is 503 degraded with the fix, views answer 503 (never 500).
    _corrupt_table(db, "page")
    server = Served(site, "--db", f"sqlite:///{db}")
    try:
        assert server.listening(), server.stderr()
        deadline = time.monotonic() + 30
        while (health := server.health()).json()["status"] in ("starting", "indexing") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert health.status_code == 503 and health.json()["status"] == "degraded"
        assert (
            f"{db}: error: the index is damaged" in health.json()["problem"]
            and "kernelwiki index --rebuild" in health.json()["problem"]
        )
        for path in ("/", "/api/pages"):
            assert httpx.get(server.url + path).status_code == 503, path
    finally:
        server.stop()

    # The posted evidence can be exported even now, and survives the rebuild.
    exported = site / "posted.jsonl"
    run = subprocess.run(
        [KERNELWIKI, "evidence", "export", str(exported), "--posted", "--db", f"sqlite:///{db}"],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert [json.loads(line)["record_id"] for line in exported.read_text().splitlines()] == ["posted-1"]
    rebuilt = subprocess.run(
        [KERNELWIKI, "index", "--rebuild", "--db", f"sqlite:///{db}"], cwd=site, capture_output=True, text=True, timeout=120
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "set aside as" in rebuilt.stdout and "1 evidence records recovered" in rebuilt.stdout
    again = subprocess.run(
        [KERNELWIKI, "evidence", "export", "--posted", "--db", f"sqlite:///{db}"],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert [json.loads(line)["record_id"] for line in again.stdout.splitlines()] == ["posted-1"]  # still known as posted
    server = Served(site, "--db", f"sqlite:///{db}")
    try:
        assert server.listening(), server.stderr()
        assert server.wait_ok()["pages"] == 4
        history = httpx.get(server.url + "/api/snippets/hw-tma:1/evidence").json()["records"]
        assert [r["record_id"] for r in history] == ["posted-1"]
    finally:
        server.stop()

    # A file that is not a database at all: serve and index each say one line and exit 1.
    db.write_bytes(b"this is not an index" * 100)
    for argv in (["serve", "--port", str(free_port())], ["index"]):
        result = subprocess.run(
            [KERNELWIKI, *argv, "--db", f"sqlite:///{db}"], cwd=site, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 1, (argv, result.stderr)
        lines = [line for line in result.stderr.strip().splitlines() if "warning:" not in line]
        assert len(lines) == 1 and lines[0].startswith(f"{db}: error: the index is damaged"), result.stderr
        assert "kernelwiki index --rebuild" in lines[0] and "serving" not in result.stdout


def _edits_are_reflected_within_2s(server: Served, site: Path) -> None:
    def within(seconds: float, check: Any) -> float:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            if check():
                return time.monotonic() - started
            time.sleep(0.05)
        raise AssertionError(f"not reflected within {seconds}s")

    page = site / "wiki" / "live-page.md"
    page.write_text(PAGE.format(id="live-page", title="Live page", word="zebrafish", n=1))
    within(
        2.0,
        lambda: any(
            r["id"] == "live-page" for r in httpx.get(server.url + "/api/search", params={"q": "zebrafish"}).json()["results"]
        ),
    )
    page.write_text(PAGE.format(id="live-page", title="Renamed live page", word="okapi", n=2))
    within(2.0, lambda: "Renamed live page" in httpx.get(server.url + "/pages/live-page").text)
    assert httpx.get(server.url + "/api/search", params={"q": "okapi"}).json()["results"][0]["id"] == "live-page"
    page.unlink()
    within(2.0, lambda: httpx.get(server.url + "/pages/live-page").status_code == 404)
    assert httpx.get(server.url + "/api/search", params={"q": "okapi"}).json()["total"] == 0


def _a_moved_away_wiki_keeps_the_last_index_and_health_says_degraded_until_it_is_back(server: Served, site: Path) -> None:
    pages = server.wait_ok()["pages"]
    (site / "wiki").rename(site / "wiki.away")
    health = _until(10, lambda: (h := server.health()).json()["status"] == "degraded" and h)
    body = health.json()
    assert health.status_code == 200 and body["stale"] is True  # the index still answers: not a 503
    assert f"{site / 'wiki'}: error: the wiki folder is missing" in body["problem"] and "last index" in body["problem"]
    assert body["pages"] == pages
    assert httpx.get(server.url + "/pages/hw-tma").status_code == 200
    assert httpx.get(server.url + "/api/search", params={"q": "tma"}).json()["total"] > 0
    (site / "wiki.away").rename(site / "wiki")
    assert _until(10, lambda: server.health().json()["status"] == "ok")
    (site / "wiki" / "back.md").write_text(PAGE.format(id="back-page", title="Back", word="narwhal", n=1))
    _until(10, lambda: httpx.get(server.url + "/pages/back-page").status_code == 200)  # watched again
    assert "the wiki folder is missing" in server.stderr() and "Traceback" not in server.stderr()


def test_watch_reflects_added_changed_and_deleted_pages_within_2s_and_a_wiki_moved_away_keeps_the_last_index_until_back(
    site: Path,
) -> None:
    """One `serve --watch` checked both ways (one start instead of two): edits are reflected within 2 s; then the
    wiki folder moved away keeps the last index, health says degraded until it is back, and it is watched again."""
    server = Served(site, "--db", f"sqlite:///{site / 'index.db'}", "--watch")
    try:
        assert server.listening(), server.stderr()
        server.wait_ok()
        _edits_are_reflected_within_2s(server, site)
        _a_moved_away_wiki_keeps_the_last_index_and_health_says_degraded_until_it_is_back(server, site)
    finally:
        server.stop()


def _index_fds(pid: int, db: Path) -> list[int]:
    """The open-flags of every descriptor of process `pid` on the index file."""
    flags = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if Path(os.readlink(fd)) == db:
                info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
                flags.append(int(next(line for line in info.splitlines() if line.startswith("flags:")).split()[1], 8))
        except OSError:
            continue
    return flags


def test_several_workers_serve_read_only_and_still_take_posted_evidence(site: Path) -> None:
    db = site / "index.db"
    server = Served(site, "--db", f"sqlite:///{db}", "--workers", "2")
    try:
        assert server.listening(), server.stderr()
        body = server.wait_ok()
        assert body["read_only"] is True and body["pages"] == 4
        with httpx.Client(base_url=server.url) as client:
            for _ in range(20):
                assert client.get("/api/search", params={"q": "tma"}).status_code == 200
            opened = {pid: _index_fds(pid, db) for pid in _descendants(server.proc.pid)}  # the workers and the zygote
            assert any(opened.values()), opened  # the workers that answered hold the index open …
            assert all(flags & 3 == os.O_RDONLY for fds in opened.values() for flags in fds), opened  # … read-only
            record = tma_record(record_id="w-1")
            assert client.post("/api/evidence", json=[record], headers=AUTH).json()["inserted"] == 1
            assert [r["record_id"] for r in client.get("/api/snippets/hw-tma:1/evidence").json()["records"]] == ["w-1"]
    finally:
        assert server.stop() < 5


def _receive_queue(server_port: int, client_port: int) -> int | None:
    """Bytes the server has not yet read from this client's connection (/proc/net/tcp); None: no such connection."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, queues = fields[1], fields[2], fields[4]
        if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
            return int(queues.split(":")[1], 16)
    return None


def wait_in_flight(server_port: int, client: socket.socket, timeout: float = 15) -> None:
    """Poll until the server has read everything `client` sent and has not answered: its request is in flight."""
    client_port = client.getsockname()[1]
    deadline = time.monotonic() + timeout
    while _receive_queue(server_port, client_port) != 0:
        assert time.monotonic() < deadline, f"the server did not read the request within {timeout}s"
        time.sleep(0.01)
    timeout_before = client.gettimeout()
    client.setblocking(False)
    try:
        answer = client.recv(200, socket.MSG_PEEK)
    except BlockingIOError:
        return
    finally:
        client.settimeout(timeout_before)
    raise AssertionError(f"answered instead of staying in flight: {answer!r}")


def _generations(pid: int, search_dir: Path) -> set[str]:
    """The generation folders of `search_dir` that process `pid` has files of memory-mapped."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    prefix = str(search_dir) + "/"
    return {
        Path(line.split(maxsplit=5)[5]).relative_to(search_dir).parts[0]
        for line in maps.splitlines()
        if len(line.split(maxsplit=5)) == 6 and line.split(maxsplit=5)[5].startswith(prefix)
    }


def test_workers_share_one_on_disk_full_text_index_and_both_follow_a_reindex(site: Path) -> None:
    db, search_dir = site / "index.db", site / "index.db.search"
    server = Served(site, "--db", f"sqlite:///{db}", "--workers", "2", "--watch")
    try:
        assert server.listening(120), server.stderr()
        server.wait_ok(120)

        def mapped(word: str) -> dict[int, set[str]] | None:
            """Each worker's mapped generations, once two workers map one and a search for `word` finds it."""
            if httpx.get(server.url + "/api/search", params={"q": word}, timeout=10).json()["total"] == 0:
                return None
            found = {p: _generations(p, search_dir) for p in _descendants(server.proc.pid)}
            found = {pid: g for pid, g in found.items() if g}
            current = json.loads((search_dir / "CURRENT").read_text())["folder"]
            return found if len(found) == 2 and all(g == {current} for g in found.values()) else None

        before = _until(60, lambda: mapped("tma"))  # both workers read the one folder the supervisor built
        (first,) = next(iter(before.values()))
        assert sorted(p.name for p in search_dir.glob("g*")) == [first]
        page = site / "wiki" / "quokka.md"
        page.write_text(PAGE.format(id="quokka-page", title="Quokka page", word="quokka", n=1))
        after = _until(60, lambda: mapped("quokka"))  # the watcher reindexed: both workers moved to the new generation
        assert after.keys() == before.keys() and next(iter(after.values())) != {first}
    finally:
        assert server.stop() < 5


def _an_unauthenticated_100_mb_post_is_refused_without_reading_it(served: Served) -> None:
    status = Path(f"/proc/{served.proc.pid}/status")

    def rss_kib() -> int:
        return int(next(line for line in status.read_text().splitlines() if line.startswith("VmRSS:")).split()[1])

    before = rss_kib()
    chunk = b"[" * (1024 * 1024)
    sent = 0
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n" + chunk
        )
        sent += len(chunk)
        answer = sock.recv(4096)
        try:
            while sent < 100 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server closed the connection instead of reading 100 MB
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert sent < 50 * 1024 * 1024, sent  # the server hung up instead of draining the upload
    assert rss_kib() - before < 20 * 1024, (before, rss_kib())
    assert served.health().status_code == 200


def test_a_100_mb_post_is_refused_unread_and_it_stops_within_5s_while_an_upload_and_a_locked_index_write_are_running(
    served: Served, site: Path
) -> None:
    """One server checked three ways (one start instead of three): an unauthenticated 100 MB post is refused without
    reading it; then SIGTERM ends the process within 5 s while an upload that never finishes is in flight and an
    insert waits in a worker thread (up to 30 s) for SQLite's write lock, which another writer holds."""
    served.wait_ok()
    _an_unauthenticated_100_mb_post_is_refused_without_reading_it(served)
    record = {
        "record_id": "locked-1",
        "snippet_id": "hw-tma:1",
        "page_id": "hw-tma",
        "target": "sm_90a",
        "step": "compile",
        "status": "pass",
        "content_hash": "abc",
        "timestamp": "2026-12-01T00:00:00Z",
    }
    body = json.dumps([record]).encode()
    lock = sqlite3.connect(site / "index.db", timeout=5)
    lock.execute("BEGIN IMMEDIATE")  # another writer holds the index
    try:
        with (
            socket.create_connection(("127.0.0.1", served.port), timeout=10) as slow,
            socket.create_connection(("127.0.0.1", served.port), timeout=10) as locked,
        ):
            # An authorised upload that never finishes: the request stays in flight.
            slow.sendall(
                b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                + TOKEN.encode()
                + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n["
            )
            wait_in_flight(served.port, slow)
            locked.sendall(
                b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                + TOKEN.encode()
                + b"\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            wait_in_flight(served.port, locked)  # read whole by the server, unanswered: the insert waits on the lock
            took = served.stop()
    finally:
        lock.rollback()
        lock.close()
    assert served.proc.returncode is not None and took < 5, took


def _until(seconds: float, check: Any) -> Any:
    """`check()` once it is truthy, polled until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not so within {seconds}s")


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, grandchildren, …), from /proc."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            todo += [c for c in children if c not in found]
            found.update(children)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its parent's wait is missing


def _killed_leaves_nothing(proc: subprocess.Popen[bytes], helpers: set[int]) -> None:
    proc.kill()  # SIGKILL: the process can do nothing about its helpers
    proc.wait(10)
    try:
        _until(10, lambda: not any(_alive(p) for p in helpers))
    finally:
        for p in helpers:  # whatever is left is ours to stop, so the suite leaves nothing behind either
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_kill_9_of_serve_with_workers_leaves_no_helper_process(site: Path) -> None:
    server = Served(site, "--db", f"sqlite:///{site / 'index.db'}", "--workers", "2")
    helpers: set[int] = set()
    try:
        assert server.listening(120), server.stderr()
        server.wait_ok()
        # the zygote and its 2 workers
        helpers = _until(30, lambda: d if len(d := _descendants(server.proc.pid)) >= 3 else None)
    finally:
        _killed_leaves_nothing(server.proc, helpers | _descendants(server.proc.pid))


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _private_mb(pid: int) -> float:
    """Memory only process `pid` holds (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup), in MB."""
    fields = dict(line.split()[:2] for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return (int(fields["Private_Clean:"]) + int(fields["Private_Dirty:"])) / 1024


def _zygote_and_workers(server: Served, count: int) -> tuple[int, list[int]]:
    """The zygote `serve --workers N` forked and the `count` workers it forked, once they are all up."""

    def found() -> tuple[int, list[int]] | None:
        below = _children(server.proc.pid)
        if len(below) != 1:
            return None
        workers = [w for w in _children(below[0]) if _alive(w)]
        return (below[0], workers) if len(workers) == count else None

    return _until(30, found)


def _two_workers_up(site: Path, *args: str, own_group: bool = False) -> tuple[Served, int, list[int]]:
    """`serve --workers 2` on the site's SQLite index with `args`, listening, indexed, its zygote and both workers up
    (stopped again when it does not get there)."""
    server = Served(site, "--db", f"sqlite:///{site / 'index.db'}", "--workers", "2", *args, own_group=own_group)
    try:
        assert server.listening(120), server.stderr()
        server.wait_ok()
        zygote, workers = _zygote_and_workers(server, 2)
    except BaseException:
        server.stop()
        raise
    return server, zygote, workers


SPAWNED_WORKER_MB = 100
"""A worker spawned as a fresh interpreter (uvicorn's supervisor, before the zygote) held ~100 MB of its own on the
fixture wiki: Python, FastAPI and the app imported by itself (docs/benchmarks.md)."""


def test_workers_are_forked_by_a_single_threaded_zygote_and_share_its_memory(site: Path) -> None:
    server, zygote, workers = _two_workers_up(site)
    try:
        assert _ppid(zygote) == server.proc.pid and all(_ppid(w) == zygote for w in workers)
        assert len(list(Path(f"/proc/{zygote}/task").iterdir())) == 1  # forking a process with threads is unsafe
        held = [os.readlink(fd) for fd in Path(f"/proc/{zygote}/fd").iterdir() if int(fd.name) > 2]
        # the listener, the workers' ping sockets, its wake-up pair, pidfds: nothing of the index is shared
        assert all(h.startswith("socket:") or h == "anon_inode:[pidfd]" for h in held), held
        for n in range(40):  # a connection each: the kernel spreads them over both workers
            assert httpx.get(server.url + "/api/search", params={"q": f"tma {n}"}).status_code == 200
            assert httpx.get(server.url + ("/pages/hw-tma" if n % 2 else "/")).status_code == 200
        private = {w: _private_mb(w) for w in workers}
        print(f"private MB per worker after 80 requests: {private}; the zygote: {_private_mb(zygote):.1f}")
        assert all(mb < 0.7 * SPAWNED_WORKER_MB for mb in private.values()), private
    finally:
        assert server.stop() < 5


def test_a_worker_killed_with_sigkill_is_replaced_and_the_port_keeps_answering(site: Path) -> None:
    server, zygote, first = _two_workers_up(site)
    try:
        for victim in first:  # both, one after the other: at the end only replacements serve
            os.kill(victim, signal.SIGKILL)
            assert httpx.get(server.url + "/api/search", params={"q": "tma"}).status_code == 200  # the other answers
            _until(30, lambda v=victim: v not in _children(zygote) and len(_zygote_and_workers(server, 2)[1]) == 2)
        zygote_now, now = _zygote_and_workers(server, 2)
        assert zygote_now == zygote and not set(now) & set(first)
        for _ in range(10):
            answer = httpx.get(server.url + "/api/search", params={"q": "tma"})
            assert answer.json()["total"] > 0, (answer.text[:500], server.stderr()[-3000:])
        assert server.health().json()["status"] == "ok"
        assert "ended (killed by signal 9)" in server.stderr()
    finally:
        assert server.stop() < 5


def test_ctrl_c_reaching_every_process_stops_the_workers_gracefully(site: Path) -> None:
    """One Ctrl-C: SIGINT to serve, the zygote and the workers at once (serve passes it on as SIGTERM too)."""
    server, _, _ = _two_workers_up(site, own_group=True)
    try:
        started = time.monotonic()
        os.killpg(server.proc.pid, signal.SIGINT)
        assert server.proc.wait(10) == 0 and time.monotonic() - started < 5
        err = server.stderr()
        assert err.count("Application shutdown complete") == 2 and "killed" not in err, err[-3000:]
    finally:
        server.stop()


def test_serves_command_line_settings_reach_every_worker(site: Path) -> None:
    """`--try` is a flag of `serve`, not a variable the workers could read: each worker serves the editor."""
    server, _, _ = _two_workers_up(site, "--try")
    try:
        answers = {httpx.get(server.url + "/try").status_code for _ in range(20)}  # a connection each: both workers
        assert answers == {200}, answers
    finally:
        assert server.stop() < 5


def test_kill_9_of_the_zygote_stops_serve_with_an_error_and_leaves_no_worker(site: Path) -> None:
    server, zygote, workers = _two_workers_up(site)
    try:
        os.kill(zygote, signal.SIGKILL)
        assert server.proc.wait(10) == 1
        assert "error: the workers stopped" in server.stderr()
        _until(10, lambda: not any(_alive(w) for w in workers))
    finally:
        server.stop()


def test_kill_9_of_index_mid_parse_leaves_no_helper_process(site: Path) -> None:
    for n in range(3000):  # enough files for the parsing pool (app/index/build.py: PARALLEL_THRESHOLD)
        (site / "wiki" / f"gen-{n:04d}.md").write_text(PAGE.format(id=f"gen-{n:04d}", title=f"Generated {n}", word=f"w{n}", n=n))
    with (site / "index.err").open("w") as err:
        proc = subprocess.Popen([KERNELWIKI, "index", "--db", f"sqlite:///{site / 'index.db'}"], cwd=site, stderr=err)
    # The pool is up: the forkserver, the resource tracker and the pool's workers under it.
    helpers: set[int] = set()
    try:
        helpers = _until(60, lambda: d if len(d := _descendants(proc.pid)) >= 3 else None)
        assert proc.poll() is None, "the index finished before it could be killed"
    finally:
        _killed_leaves_nothing(proc, helpers | _descendants(proc.pid))


def test_sigterm_under_load_exits_quickly_and_quietly(served: Served) -> None:
    """Clients keep asking and uploads hang while SIGTERM arrives: the process is gone soon, with no traceback."""
    import threading

    served.wait_ok()
    stop = threading.Event()
    answered = [0]

    def ask(n: int) -> None:
        with httpx.Client(base_url=served.url, timeout=10) as client:
            paths = ["/api/search?q=tensor", f"/api/search?q=word{n}", "/pages/hw-tma", "/llms-full.txt", "/api/pages"]
            while not stop.is_set():
                try:
                    client.get(paths[answered[0] % len(paths)])
                    answered[0] += 1
                except httpx.HTTPError:
                    return  # the server went away: done

    askers = [threading.Thread(target=ask, args=(n,), daemon=True) for n in range(16)]
    for t in askers:
        t.start()
    uploads = []
    for _ in range(8):  # authorised uploads that never finish: still in flight when the grace period ends
        sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
        sock.sendall(
            b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n["
        )
        uploads.append(sock)
    _until(30, lambda: answered[0] >= 50)  # under load
    took = served.stop()
    stop.set()
    for sock in uploads:
        sock.close()
    err = served.stderr()
    print(f"SIGTERM under load: exited in {took:.2f}s after {answered[0]} answers")
    assert served.proc.returncode is not None and took < 4.5, took
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err[-3000:]
    assert "cancelled" in err  # each cancelled request is one line
