"""SIGTERM under load: how long `kernelwiki serve --watch` takes to exit, and what it logs.

    .venv/bin/python bench/bench_sigterm.py DIR [PAGES]

Writes bench/bench_index.py's synthetic wiki into DIR (once; DIR is reused),
indexes it, serves it, and sends SIGTERM while 32 clients keep asking (search,
pages, listings, the dashboard) and 8 authorised uploads hang mid-body (they
outlive the grace period and are cancelled). Prints the seconds from SIGTERM to
exit and the tracebacks and one-line cancellations in the server's log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate  # noqa: E402
from bench.proc import free_port  # noqa: E402

KERNELWIKI = str(Path(sys.executable).parent / "kernelwiki")
HANGING_UPLOAD = (
    b"POST /api/evidence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n["
)


def main() -> None:
    folder, pages = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    db = f"sqlite:///{folder}/index.db"
    if not (folder / "wiki").exists():
        generate(folder / "wiki", pages)
        (folder / "evidence").mkdir()
        subprocess.run([KERNELWIKI, "index", "--db", db], cwd=folder, check=True, capture_output=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (folder / "serve.err").open("w") as log:
        server = subprocess.Popen(
            [KERNELWIKI, "serve", "--port", str(port), "--db", db, "--watch"],
            cwd=folder,
            stdout=log,
            stderr=log,
            env={**os.environ, "KERNELWIKI_RUNNER_TOKEN": "t"},
        )
    while True:
        try:
            if httpx.get(url + "/api/health", timeout=5).json()["status"] == "ok":
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop = threading.Event()
    answered = [0]

    def ask(n: int) -> None:
        paths = [f"/api/search?q=tensor{n}", "/pages/page-1", f"/api/pages?offset={n * 10}", "/", "/evidence"]
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.is_set():
                try:
                    client.get(paths[answered[0] % len(paths)])
                    answered[0] += 1
                except httpx.HTTPError:
                    return

    for n in range(32):
        threading.Thread(target=ask, args=(n,), daemon=True).start()
    uploads = []
    for _ in range(8):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(HANGING_UPLOAD)
        uploads.append(sock)
    while answered[0] < 100:
        time.sleep(0.05)
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    server.wait(60)
    took = time.monotonic() - started
    stop.set()
    text = (folder / "serve.err").read_text()
    print(
        f"pages={pages} exit_s={took:.2f} answers_before_sigterm={answered[0]} "
        f"tracebacks={text.count('Traceback')} cancelled_lines={text.count('was cancelled')}"
    )


if __name__ == "__main__":
    main()
