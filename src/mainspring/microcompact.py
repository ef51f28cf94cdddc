"""Microcompact: a repeated identical tool call is shown to the model once.

When a later call has the same tool name and arguments as an earlier one and
returned the same content, the model sees ``[same result as turn N]``
instead of the content again. Only later repeats are rewritten, so the
cached prefix never changes. The index is incremental: appending a message
costs O(message), whatever the history length.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import overload

from mainspring.messages import Message, ToolResultPart

__all__ = ["HistoryView", "Microcompactor"]


class HistoryView(Sequence[Message]):
    """A read-only view of the first ``n`` items of an append-only list.

    Taking one costs O(1) whatever the history length; it never changes,
    because the list under it is only ever appended to.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int) -> None:
        self._items = items
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return self._items[: self._n][index]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("history index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._n):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequences are unhashable

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"


class Microcompactor:
    """Maintains the model's view of a transcript, with repeats compacted."""

    def __init__(self, *, enabled: bool = True) -> None:
        """Create an empty view."""
        self.enabled = enabled
        self.view: list[Message] = []
        """What the model is sent, in transcript order."""
        self._call_keys: dict[str, str] = {}
        self._first: dict[str, tuple[int, str]] = {}

    def snapshot(self) -> HistoryView:
        """The view as it is now, in O(1)."""
        return HistoryView(self.view, len(self.view))

    def append(self, message: Message, turn_index: int) -> None:
        """Add one transcript message to the view."""
        if not self.enabled:
            self.view.append(message)
            return
        if message.role == "assistant":
            for call in message.tool_calls:
                key = call.name + "\0" + json.dumps(call.arguments, sort_keys=True)
                self._call_keys[call.id] = key
            self.view.append(message)
            return
        if message.role != "tool":
            self.view.append(message)
            return
        parts = list(message.parts)
        changed = False
        for i, part in enumerate(parts):
            if not isinstance(part, ToolResultPart) or part.is_error:
                continue
            call_key = self._call_keys.get(part.tool_use_id)
            if call_key is None:
                continue
            key = call_key
            first = self._first.get(key)
            if first is None:
                self._first[key] = (turn_index, part.content)
            elif first[1] == part.content:
                note = f"[same result as turn {first[0]}]"
                if len(note) < len(part.content):
                    parts[i] = replace(part, content=note)
                    changed = True
        self.view.append(replace(message, parts=tuple(parts)) if changed else message)
