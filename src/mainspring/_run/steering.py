"""Live steering: user messages queued while a run is active, taken at step boundaries.

A session owns one :class:`SteeringQueue`; its loop takes ``next_step``
messages before each model call (and instead of ending a turn that would
otherwise end) and ``follow_up`` messages when a turn ends, as the next turn
of the same run. The queue lives in the process: a message still queued when
a run stops (paused, cancelled, failed) is taken by the session's next run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal, TypeAlias

from mainspring.messages import Message

__all__ = ["SteerMode", "Steering", "SteeringQueue"]

SteerMode: TypeAlias = Literal["next_step", "follow_up"]


@dataclass(frozen=True, slots=True)
class Steering:
    """One queued message."""

    id: str
    message: Message
    mode: SteerMode


class SteeringQueue:
    """The messages waiting for a run to take them, in the order they came."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        """An empty queue."""
        self._items: tuple[Steering, ...] = ()
        """A tuple, replaced on change: it is nearly always empty, and the empty
        tuple is shared (every live session keeps one queue; a deque would hold
        a 64-slot block, a list an object of its own for the collector to walk)."""

    def put(self, message: Message, mode: SteerMode) -> Steering:
        """Queue ``message``; returns its entry (its id names it in events)."""
        item = Steering(id=f"steer_{uuid.uuid4().hex}", message=message, mode=mode)
        self._items = (*self._items, item)
        return item

    def waiting(self, mode: SteerMode) -> bool:
        """Whether a message of ``mode`` is queued."""
        return any(item.mode == mode for item in self._items)

    def take(self, mode: SteerMode) -> list[Steering]:
        """Remove and return the queued messages of ``mode``, oldest first."""
        taken = [item for item in self._items if item.mode == mode]
        if taken:
            self._items = tuple(item for item in self._items if item.mode != mode)
        return taken

    def take_first(self, mode: SteerMode) -> Steering | None:
        """Remove and return the oldest queued message of ``mode``."""
        for i, item in enumerate(self._items):
            if item.mode == mode:
                self._items = self._items[:i] + self._items[i + 1 :]
                return item
        return None

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self) -> tuple[Steering, ...]:
        """What is queued now."""
        return self._items
