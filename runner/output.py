"""Capped command output: the first and last bytes of a stream kept, the middle counted as "[… N lines omitted]".

A program printing gigabytes costs neither memory nor disk: `OutputCap` holds at
most head + 2 × tail bytes while it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTPUT_HEAD_BYTES = 48 * 1024
OUTPUT_TAIL_BYTES = 16 * 1024
"""Kept per stream: the first and last bytes of a command's output; the middle is counted, not kept."""


@dataclass
class CapturedOutput:
    """Capped text of one output stream."""

    text: str = ""  # head, "[… N lines omitted]", tail
    truncated: bool = False  # True when lines were omitted
    omitted_lines: int = 0  # how many lines were left out
    total_bytes: int = 0  # how many bytes the command wrote in all


class OutputCap:
    """Keeps the first `head` and last `tail` bytes of a stream, counting the lines in between."""

    def __init__(self, head: int = OUTPUT_HEAD_BYTES, tail: int = OUTPUT_TAIL_BYTES) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.middle_newlines = 0
        self.middle_bytes = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Take the next chunk of output; never holds more than head + 2 × tail bytes."""
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_cap
        if excess > self.tail_cap:
            self.middle_newlines += self.tail.count(b"\n", 0, excess)
            self.middle_bytes += excess
            del self.tail[:excess]

    def result(self) -> CapturedOutput:
        """The kept text, cut at line boundaries, with a marker saying how many lines were left out."""
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            self.middle_newlines += self.tail.count(b"\n", 0, excess)
            self.middle_bytes += excess
            del self.tail[:excess]
        if self.middle_bytes == 0:
            data = bytes(self.head + self.tail)
            return CapturedOutput(data.decode("utf-8", "replace"), False, 0, self.total)
        head, tail = bytes(self.head), bytes(self.tail)
        omitted = self.middle_newlines
        cut = head.rfind(b"\n")
        if cut >= 0:
            omitted += head.count(b"\n", cut + 1)
            head = head[: cut + 1]
        else:
            head = head + b"\n"
        first = tail.find(b"\n")
        if first >= 0:
            omitted += 1  # the partial line at the start of the tail, completed by its newline
            tail = tail[first + 1 :]
        else:
            tail = b""
        marker = f"[… {omitted} lines omitted]\n".encode()
        text = (head + marker + tail).decode("utf-8", "replace")
        return CapturedOutput(text, True, omitted, self.total)


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """`text` within `limit` UTF-8 bytes: head and tail kept, the middle replaced by a marker; and whether it was cut.

    The cut falls on line boundaries when the text has lines near both ends
    ("[… N lines omitted]"), else inside the long line ("[… N bytes omitted]").
    `OutputCap` does the same while a command's output streams in; this is for a
    text already whole (a record's output, a posted field).
    """
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    half = max(limit // 2 - 40, 1)  # room for the marker
    head, tail = data[:half], data[len(data) - half :]
    h, t = head.rfind(b"\n"), tail.find(b"\n")
    if h >= half // 2 and 0 <= t < half // 2:
        head, tail = head[: h + 1], tail[t + 1 :]
        lines = data.count(b"\n", len(head), len(data) - len(tail))
        marker = f"[… {lines} lines omitted]\n"
    else:
        marker = f"\n[… {len(data) - len(head) - len(tail)} bytes omitted]\n"
    # 'ignore' drops a character split by the cut instead of inventing one.
    return head.decode("utf-8", "ignore") + marker + tail.decode("utf-8", "ignore"), True
