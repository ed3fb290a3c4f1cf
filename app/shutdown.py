"""Shutting down quietly: a request cancelled at shutdown is one log line, not a traceback.

On SIGTERM uvicorn stops accepting, lets running requests finish for
`KERNELWIKI_SHUTDOWN_TIMEOUT_S`, then cancels the rest; it logs each cancelled
request as "Exception in ASGI application" with a full traceback (25 of them
under load). Nothing went wrong: the request was cut short on purpose. This
filter on uvicorn's error log turns each into one line saying so.
"""

from __future__ import annotations

import asyncio
import logging

CANCELLED_LINE = "a request still running when the shutdown grace period ended was cancelled"


class CancelledAtShutdown(logging.Filter):
    """Rewrites uvicorn's record of a request cancelled at shutdown into one line without its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError):
            record.msg, record.args = CANCELLED_LINE, ()
            record.exc_info, record.exc_text, record.levelno, record.levelname = None, None, logging.WARNING, "WARNING"
        return True


def quiet_cancellations() -> None:
    """Install the filter on uvicorn's error log (once; call it after uvicorn has configured logging)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, CancelledAtShutdown) for f in logger.filters):
        logger.addFilter(CancelledAtShutdown())
