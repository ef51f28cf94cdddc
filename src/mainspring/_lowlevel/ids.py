"""Session, stream and call ids without a system call per id.

Replaces ``str(uuid.uuid4())`` and ``"call_" + uuid.uuid4().hex``: pays 4.6 % of S1 (36 k
instructions), bench/F-figures.md.

``uuid.uuid4()`` asks the operating system for 16 random bytes each time (a system
call) and builds a ``UUID`` object to format. Here a stream or session id takes its 16
bytes from a pool drawn 2 KiB at a time, and a call id is a per-process random prefix
and a counter (the ids need to be unique, not secret).
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid

__all__ = ["new_call_id", "new_uuid4"]


class _CallIds:
    """Engine call ids: ``call_<20 random hex><12 hex counter>``.

    A random prefix per process (drawn again in a forked child) and a counter,
    so ids are unique across steps, turns, sessions and processes without a
    system call per id.
    """

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self.prefix = "call_" + uuid.uuid4().hex[:20]
        self.counter = itertools.count()

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.counter):012x}"


class _RandomHex:
    """The operating system's random bytes as hex, drawn 2 KiB at a time.

    ``os.urandom`` is a system call (most of a UUID4's cost); each of these
    draws serves 128 ids. Every id takes its own bytes: the lock keeps two
    threads from taking the same ones, and a forked child draws afresh
    instead of repeating its parent's.
    """

    __slots__ = ("_hex", "_lock", "_next")

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._hex = ""
        self._next = 0

    def take(self) -> str:
        """32 hex digits (16 random bytes) no other call gets."""
        with self._lock:
            start = self._next
            if start >= len(self._hex):
                self._hex = os.urandom(2048).hex()
                start = 0
            self._next = start + 32
            return self._hex[start : start + 32]


_random_hex = _RandomHex()


def new_uuid4() -> str:
    """A random UUID4 in its text form, as ``str(uuid.uuid4())`` is, at a fraction of the cost."""
    h = _random_hex.take()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


new_call_id = _CallIds()
"""A fresh engine call id: unique across steps, turns, sessions and processes."""
