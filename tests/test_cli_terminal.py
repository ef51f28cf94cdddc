"""The real ``mainspring`` entry point under a pseudo-terminal: prompts and Ctrl-C."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time

import pytest

pytestmark = [pytest.mark.timeout(120)]


def run_in_pty(
    args: list[str], *, answers: dict[bytes, bytes], timeout: float = 60.0
) -> tuple[int, str]:
    """Run ``python -m mainspring ARGS`` on a pty; type each answer when its prompt shows."""
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real entry point on a terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "mainspring", *args], env)
    output = b""
    pending = dict(answers)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"no exit within {timeout}s; the terminal showed:\n{output!r}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            for prompt in [p for p in pending if p in output]:
                os.write(fd, pending.pop(prompt))
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def test_ctrl_c_at_the_approval_prompt_exits_at_once_without_paying() -> None:
    code, screen = run_in_pty(["demo"], answers={b"Approve?": b"\x03"})
    assert code == 130, screen
    assert "interrupted" in screen
    assert "→ send_payment" not in screen


def test_answering_yes_at_the_prompt_pays() -> None:
    code, screen = run_in_pty(["demo"], answers={b"Approve?": b"y\r"})
    assert code == 0, screen
    assert "→ send_payment" in screen and "turn complete (end_turn)" in screen
