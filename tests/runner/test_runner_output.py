"""Capped output (runner/output.py): a stream capped while it is read, and a whole text capped to a byte limit."""

from __future__ import annotations

from runner.output import OutputCap, cap_text


def test_output_cap_never_holds_more_than_head_plus_twice_tail() -> None:
    cap = OutputCap(head=100, tail=50)
    for _ in range(10000):
        cap.feed(b"x" * 63 + b"\n")
        assert len(cap.head) + len(cap.tail) <= 100 + 2 * 50 + 64
    result = cap.result()
    assert result.truncated and result.total_bytes == 640000
    assert result.omitted_lines + result.text.count("x\n") == 10000


def test_small_output_is_kept_whole() -> None:
    cap = OutputCap(head=100, tail=50)
    cap.feed(b"a\nb\n")
    assert cap.result().text == "a\nb\n" and not cap.result().truncated


def test_a_long_text_keeps_its_head_and_tail_cut_at_lines_and_counts_what_it_left_out() -> None:
    text = "".join(f"line {i}\n" for i in range(10_000))
    capped, cut = cap_text(text, 1000)
    assert cut and len(capped.encode()) <= 1000
    assert capped.startswith("line 0\n") and capped.endswith("line 9999\n")
    head, marker, tail = capped.partition("[… ")
    omitted = int(marker and tail.split(" lines omitted]")[0])
    assert head.count("\n") + omitted + tail.count("\n") - 1 == 10_000


def test_one_long_line_is_cut_inside_it_and_a_short_text_is_kept_whole() -> None:
    capped, cut = cap_text("x" * 5000, 1000)
    assert cut and "bytes omitted]" in capped and len(capped.encode()) <= 1000
    assert cap_text("short\n", 1000) == ("short\n", False)
