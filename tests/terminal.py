"""The real ``mainspring`` entry point on a pseudo-terminal (pexpect), with bounded waits."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60.0
"""Seconds any one wait on the child may take (a busy two-core machine)."""

__all__ = ["WAIT", "Start", "Terminal", "terminal"]  # terminal: a fixture (conftest loads it)


def _as_from_a_shell() -> None:
    """The child's Ctrl-C as a shell's foreground job has it (the default disposition).

    A test run started in the background (CI's, without job control) ignores
    SIGINT, and an ignored signal stays ignored across exec: the child would
    never see the Ctrl-C these tests press, which no user at a terminal has.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """``python -m mainspring ARGS`` on a pseudo-terminal, with bounded waits."""

    def __init__(self, *args: str) -> None:
        # NO_COLOR: rich writes no colour codes into the text the tests look for.
        env = {**os.environ, "COLUMNS": "100", "TERM": "xterm", "NO_COLOR": "1"}
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "mainspring", *args],
            cwd=str(ROOT),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(40, 100),
            timeout=WAIT,
            preexec_fn=_as_from_a_shell,
        )
        self.screen = ""

    def wait_for(self, text: str) -> str:
        """Wait until ``text`` shows; what showed before it."""
        try:
            self.child.expect_exact(text, timeout=WAIT)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            seen = self.screen + str(self.child.before)
            raise AssertionError(f"{text!r} never showed; the terminal showed:\n{seen}") from exc
        before = str(self.child.before)
        self.screen += before + text
        return before

    def wait_for_pattern(self, pattern: str) -> re.Match[str]:
        self.child.expect(pattern, timeout=WAIT)
        self.screen += str(self.child.before) + str(self.child.after)
        match = self.child.match
        assert isinstance(match, re.Match)
        return match

    def type(self, line: str) -> None:
        self.child.sendline(line)

    def exit_code(self) -> int:
        """Wait (bounded) for the child to end; its exit code."""
        self.child.expect(pexpect.EOF, timeout=WAIT)
        self.screen += str(self.child.before)
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"ended by signal {self.child.signalstatus}:\n{self.screen}"
        return status

    def kill(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


Start = Callable[..., Terminal]
"""``start("chat", "--store", url)``: a started terminal."""


@pytest.fixture
def terminal() -> Iterator[Start]:
    """Starts terminals; any still running when the test ends is killed."""
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        started.append(Terminal(*args))
        return started[-1]

    yield start
    for term in started:
        term.kill()
