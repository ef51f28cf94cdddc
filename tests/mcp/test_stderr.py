"""A stdio server's stderr tail stays bounded and reads its exit status only from the end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mainspring.mcp._stderr import TAIL_BYTES, StderrTail

MARK = b"\n[mainspring] server exited with status 7\n"


@given(st.lists(st.binary(max_size=3000), max_size=20))
def test_the_tail_is_bounded_and_is_the_end_of_what_was_written(chunks: list[bytes]) -> None:
    tail = StderrTail("s")
    for chunk in chunks:
        tail.feed(chunk)
    whole = b"".join(chunks)
    kept = whole[-TAIL_BYTES:] if whole else b""
    assert tail.dropped == len(whole) - len(kept)
    assert tail._buffer == kept
    if MARK.strip() not in kept:
        assert tail.exit_status is None


@given(st.binary(max_size=10_000), st.integers(0, 255))
def test_the_status_is_read_from_the_wrappers_last_line(before: bytes, status: int) -> None:
    tail = StderrTail("s")
    tail.feed(before)
    tail.feed(f"\n[mainspring] server exited with status {status}\n".encode())
    assert tail.exit_status == status
    tail.feed(b"a grandchild wrote later\n")
    assert tail.exit_status is None


def test_describe_names_what_is_known() -> None:
    tail = StderrTail("s")
    assert tail.describe() == ""
    tail.feed(b"boom\n" + MARK)
    assert tail.describe() == "exit status 7; stderr: boom"
