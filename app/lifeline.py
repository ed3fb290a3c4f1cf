"""Helper processes that end with the process they serve, even when it is killed with SIGKILL.

The service starts helper processes: the parsing pool of a large reindex
(`ProcessPoolExecutor` on a forkserver, app/index/build.py) and the workers of
`serve --workers N` (forked by a supervisor, app/serve_workers.py, which
watches `serve` the same way). Killed with SIGKILL, their parent
cannot stop them, and each holds a pipe that keeps the next alive (a pool
worker keeps the forkserver, which keeps multiprocessing's resource tracker):
2-4 of them lived on after every `kill -9`. A helper therefore watches its
parent: `exit_with(pid)` opens a pidfd for it and a daemon thread ends the
helper the moment the parent is gone. The forkserver and the resource tracker
then see their last client go and exit on their own.
"""

from __future__ import annotations

import os
import select
import threading


def exit_with(pid: int) -> None:
    """End this process (`os._exit(1)`) as soon as process `pid` has ended; at once when it is gone already."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)

    def wait() -> None:
        select.select([fd], [], [])  # a pidfd becomes readable when its process ends
        os._exit(1)

    threading.Thread(target=wait, name="kernelwiki-lifeline", daemon=True).start()
