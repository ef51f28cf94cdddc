"""Which saves of an A2A task may wait: streamed text between two status changes.

The SDK saves a task at every event of its stream, each chunk of streamed
text too, and each save writes the whole task. In a shared store a long
answer would then cost one write per chunk, and bytes that grow with the
square of its length (250 chunks of a 2,000-character answer wrote 460 KB).

So a save that changes nothing but the task's artifacts, within
:data:`ARTIFACT_INTERVAL` seconds of this worker's last write of the task,
is skipped. Nothing is lost: a task carries every artifact so far, and the
stream's next status change (at the latest the one that pauses or ends it) is
written with them all. Meanwhile a reader (on any worker) sees the task's
state as of the last write and its text at most a second old. A save that
changes anything else — the state, the status message, the history — is
always written, before the event reaches the client.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from a2a.types.a2a_pb2 import Task

__all__ = ["ARTIFACT_INTERVAL", "SaveFilter"]

ARTIFACT_INTERVAL = 1.0
"""Seconds within which a change of a task's artifacts alone waits for the next write."""


class SaveFilter:
    """Remembers this worker's last write of each task (its shape without artifacts, and when)."""

    TASKS = 4096
    """Tasks remembered (the least recently written forgotten first: they are written again)."""

    def __init__(
        self, *, interval: float = ARTIFACT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Skip artifact-only saves within ``interval`` seconds of the last write (on ``clock``)."""
        self._interval = interval
        self._clock = clock
        self._written: OrderedDict[tuple[str, str], tuple[bytes, float]] = OrderedDict()

    def needed(self, owner: str, task: Task) -> bytes | None:
        """The task's shape if this save must be written (pass it to :meth:`wrote`), else None."""
        bare = Task()
        bare.CopyFrom(task)
        bare.ClearField("artifacts")
        shape = hashlib.sha256(bare.SerializeToString(deterministic=True)).digest()
        last = self._written.get((owner, task.id))
        if last is not None and last[0] == shape and self._clock() - last[1] < self._interval:
            return None
        return shape

    def wrote(self, owner: str, task_id: str, shape: bytes) -> None:
        """The save of shape ``shape`` is in the store."""
        key = (owner, task_id)
        self._written[key] = (shape, self._clock())
        self._written.move_to_end(key)
        if len(self._written) > self.TASKS:
            self._written.popitem(last=False)

    def forget(self, owner: str, task_id: str) -> None:
        """The task was deleted."""
        self._written.pop((owner, task_id), None)
