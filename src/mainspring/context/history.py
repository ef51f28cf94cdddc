"""History processors: how committed messages look to the model.

Both see each message once (O(message)). :class:`ToolResultBudget` rewrites
only the new message, as it is committed, so the cached prefix holds;
:class:`Microcompact` rewrites an older copy when a newer identical one
arrives (a prefix change, so only for large results), and reads the history
only once the view is past its ``over_tokens`` threshold, when a collapse can
happen.

* :class:`Microcompact` — a repeated identical tool call (same tool, same
  arguments, same result) is shown in full where it is newest; the older copy
  becomes a note pointing to it.
* :class:`ToolResultBudget` — a tool result longer than its budget is cut,
  keeping its head and tail, with a note of how much was left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mainspring.context.pipeline import Phase, Processor
from mainspring.errors import ConfigError
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from mainspring.context._compilation import Compilation

__all__ = ["Microcompact", "ToolResultBudget"]


class Microcompact(Processor):
    """A repeated identical tool result is shown once: in full where it is newest.

    When a call (same tool, same arguments) returns the same result as an
    earlier one, the earlier copy in the model's view becomes a short note
    pointing to the newer one; the newest result is never replaced, so the
    model always reads the fresh answer of the call it just made. Collapsing
    the older copy changes the view's prefix from there on (reported as reuse
    lost in accounting), so only results of at least ``min_chars`` characters
    are collapsed: below that, a cache miss costs more than the repeat. With
    ``over_tokens``, copies are collapsed only once the history view holds
    more than that many tokens (an agent sets it to its compaction trigger:
    below it, collapsing would only cost cache hits). Errors are never collapsed.
    """

    phase: Phase = "history"
    source = "tool_result"
    waits = False

    def __init__(
        self, *, min_chars: int = 1_000, over_tokens: int | None = None, id: str = "microcompact"
    ) -> None:
        """A microcompactor for mainspring messages."""
        super().__init__(id)
        if min_chars < 1:
            raise ConfigError(f"microcompact min_chars must be positive, got {min_chars}")
        if over_tokens is not None and over_tokens < 0:
            raise ConfigError(f"microcompact over_tokens must not be negative, got {over_tokens}")
        self.min_chars = min_chars
        self.over_tokens = over_tokens
        self.reset()

    def reset(self) -> None:
        """Forget which calls were seen."""
        self._seen: _Seen | None = None
        """What was noted, once anything was (most live sessions never get there)."""
        self._turn = 0
        self._pending: list[Message] = []
        """Messages handed over and not looked at yet, from transcript index
        ``_pending_start`` on: below ``over_tokens`` nothing collapses, so a long
        history is read only once a collapse can happen."""
        self._pending_start = 0

    def map_messages(self, messages: Sequence[Message], start: int) -> Mapping[int, Message]:
        """Keep a run to look at when a collapse can happen (none is changed here)."""
        if self._pending and start != self._pending_start + len(self._pending):
            self._note_pending()  # not the next run: what was kept goes first
        if not self._pending:
            self._pending_start = start
        self._pending.extend(messages)
        return {}

    def map_message(self, message: Message, index: int) -> Message:
        """Note repeats as they are committed (the message itself is never changed here)."""
        self._note_pending()
        if message.role == "user":
            self._turn += 1
        else:
            self._note(message, index)
        return message

    def _note_pending(self) -> None:
        """Look at the kept messages, in order, as :meth:`map_message` would have."""
        pending, self._pending = self._pending, []
        note = self._note
        for index, message in enumerate(pending, self._pending_start):
            if message.role == "user":
                self._turn += 1
            elif len(message.parts) != 1 or type(message.parts[0]) is not TextPart:
                note(message, index)  # a text-only reply holds no call or result

    def _note(self, message: Message, index: int) -> None:
        seen = self._seen
        if seen is None:
            seen = self._seen = _Seen()
        if message.role == "assistant":
            for call in message.parts:
                if isinstance(call, ToolCallPart):
                    seen.calls[call.id] = call  # its key is worked out if a result needs it
            return
        for part in message.parts:
            if (
                not isinstance(part, ToolResultPart)
                or part.is_error
                or len(part.content) < self.min_chars
            ):
                continue
            key = seen.key(part.tool_use_id)
            if key is None:
                continue
            earlier = seen.latest.get((key, part.content))
            if earlier is not None:
                seen.superseded.append((*earlier, self._turn))
            seen.latest[(key, part.content)] = (index, part.tool_use_id)

    async def process(self, ctx: Compilation[Any]) -> None:
        """Collapse the copies superseded so far (once the view is over ``over_tokens``)."""
        view = ctx.messages
        if self.over_tokens is not None and view.tokens_within(self.over_tokens):
            return  # kept for later: the view may still grow past the threshold
        self._note_pending()
        seen = self._seen
        if seen is None or not seen.superseded:
            return
        editor = ctx.edit_history()
        for index, call_id, turn in seen.superseded:
            found = _find_result(view, index, call_id)
            if found is None:  # compacted away meanwhile
                continue
            at, message = found
            note = f"[same result as the repeat of this call in turn {turn}, shown later]"
            parts = tuple(
                replace(p, content=note)
                if isinstance(p, ToolResultPart) and p.tool_use_id == call_id
                else p
                for p in message.parts
            )
            editor.replace(at, replace(message, parts=parts))
        seen.superseded.clear()


class _Seen:
    """What a :class:`Microcompact` noted: calls, their keys, the newest copy of each result."""

    __slots__ = ("call_keys", "calls", "latest", "superseded")

    def __init__(self) -> None:
        self.calls: dict[str, ToolCallPart] = {}
        self.call_keys: dict[str, str] = {}
        self.latest: dict[tuple[str, str], tuple[int, str]] = {}
        """(call key, content) -> (transcript index, call id) of its newest copy."""
        self.superseded: list[tuple[int, str, int]] = []
        """(transcript index, call id, turn of the newer copy) of copies to collapse."""

    def key(self, call_id: str) -> str | None:
        """The call's name and canonical arguments (what makes two results repeats)."""
        key = self.call_keys.get(call_id)
        if key is None:
            call = self.calls.get(call_id)
            if call is None:
                return None
            key = self.call_keys[call_id] = (
                call.name + "\0" + json.dumps(call.arguments, sort_keys=True)
            )
        return key


def _find_result(view: Sequence[Any], index: int, call_id: str) -> tuple[int, Message] | None:
    """The view entry holding ``call_id``'s result: at ``index`` unless the view was spliced."""

    def holds(i: int) -> bool:
        message = view[i]
        return isinstance(message, Message) and any(
            p.tool_use_id == call_id for p in message.tool_results_parts
        )

    if index < len(view) and holds(index):
        return index, view[index]
    for i in range(len(view) - 1, -1, -1):  # a summary spliced the view: look for it
        if holds(i):
            return i, view[i]
    return None


class ToolResultBudget(Processor):
    """Tool results over budget are cut (head and tail kept) in the model's view."""

    phase: Phase = "history"
    source = "tool_result"
    waits = False

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
