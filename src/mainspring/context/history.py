"""History processors: how committed messages look to the model.

Both map each message once, as it is committed (O(message)), and only ever
rewrite the new message, never an earlier one, so the cached prefix holds.

* :class:`Microcompact` — a repeated identical tool call (same tool, same
  arguments, same result) is shown as ``[same result as turn N]``.
* :class:`ToolResultBudget` — a tool result longer than its budget is cut,
  keeping its head and tail, with a note of how much was left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from mainspring.context.pipeline import Phase, Processor
from mainspring.errors import ConfigError
from mainspring.messages import Message, ToolResultPart

__all__ = ["Microcompact", "ToolResultBudget"]


class Microcompact(Processor):
    """Repeated identical tool results are shown once."""

    phase: Phase = "history"
    source = "tool_result"

    def __init__(self, *, id: str = "microcompact") -> None:
        """A microcompactor for mainspring messages."""
        super().__init__(id)
        self.reset()

    def reset(self) -> None:
        """Forget which calls were seen."""
        self._call_keys: dict[str, str] = {}
        self._first: dict[str, tuple[int, str]] = {}
        self._turn = 0

    def map_message(self, message: Message, index: int) -> Message:
        """Rewrite later repeats of an identical result."""
        if message.role == "user":
            self._turn += 1
            return message
        if message.role == "assistant":
            for call in message.tool_calls:
                self._call_keys[call.id] = (
                    call.name + "\0" + json.dumps(call.arguments, sort_keys=True)
                )
            return message
        parts = list(message.parts)  # a tool message
        changed = False
        for i, part in enumerate(parts):
            if not isinstance(part, ToolResultPart) or part.is_error:
                continue
            key = self._call_keys.get(part.tool_use_id)
            if key is None:
                continue
            first = self._first.get(key)
            if first is None:
                self._first[key] = (self._turn, part.content)
            elif first[1] == part.content:
                note = f"[same result as turn {first[0]}]"
                if len(note) < len(part.content):
                    parts[i] = replace(part, content=note)
                    changed = True
        return replace(message, parts=tuple(parts)) if changed else message


class ToolResultBudget(Processor):
    """Tool results over budget are cut (head and tail kept) in the model's view."""

    phase: Phase = "history"
    source = "tool_result"

    def __init__(
        self,
        max_chars: int = 50_000,
        *,
        per_tool: Mapping[str, int] | None = None,
        id: str = "tool-result-budget",
    ) -> None:
        """``max_chars`` for every tool, unless ``per_tool`` names its own budget."""
        super().__init__(id, before=("microcompact",))
        if max_chars < 200:
            raise ConfigError(f"a tool result budget must be at least 200 chars, got {max_chars}")
        self.max_chars = max_chars
        self.per_tool = dict(per_tool or {})

    def map_message(self, message: Message, index: int) -> Message:
        """Cut the message's results that are over budget."""
        if message.role != "tool":
            return message
        parts = list(message.parts)
        changed = False
        for i, part in enumerate(parts):
            if not isinstance(part, ToolResultPart):
                continue
            limit = self.per_tool.get(part.name, self.max_chars)
            if len(part.content) > limit:
                parts[i] = replace(part, content=cut(part.content, limit))
                changed = True
        return replace(message, parts=tuple(parts)) if changed else message


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` chars: head, a note of what was left out, tail."""
    if len(text) <= limit:
        return text
    note_room = 80
    keep = max(limit - note_room, 0)
    head = keep * 2 // 3
    tail = keep - head
    left = len(text) - head - tail
    end = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n[… {left} characters left out …]\n{end}"
