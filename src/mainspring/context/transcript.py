"""The append-only transcript every model call is compiled from.

Messages are *committed* by :meth:`Transcript.append` (O(delta)) or by
:meth:`Transcript.sync`, for hosts that only hold the whole list. Sync finds
the committed prefix in the new list and commits what follows it:

* **Value check** (default): for each committed index, the same object is
  accepted at once (its fingerprint was cached when it was committed);
  another object is fingerprinted by the adapter and compared with the
  cached digest. O(prefix) identity checks plus O(replaced objects)
  fingerprints, plus O(delta).
* **Identity fast path** (``trust_message_identity=True``): if the list holds
  the *last* committed message, as the same object, at its index, the whole
  prefix is taken as unchanged without looking at the others: O(1) + O(delta).
  The host promises it never replaces an earlier message while keeping the
  last one. Otherwise sync falls back to the value check.

Messages are treated as immutable once committed; changing one in place
(e.g. its ``meta`` dict) is not detected.

A changed prefix (a different message, or a list shorter than the
transcript) is refused in strict mode with :class:`PrefixMutationError`
before anything changes. In relaxed mode it starts a new *generation*: the
transcript keeps the unchanged part, commits the rest, finds its last user
message again and reports a :class:`PrefixChange` to ``on_prefix_change``.
:meth:`Transcript.invalidate_prefix` does the same for changes outside the
transcript (a new system prompt).

The last user message's index is brought up to date when read: each
committed message is looked at once, the committed prefix is never
rescanned, and committing N messages costs a list extend.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar, overload

from mainspring.codec import message_to_dict
from mainspring.errors import PrefixMutationError
from mainspring.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "MainspringAdapter",
    "MessageAdapter",
    "PrefixChange",
    "Transcript",
    "TranscriptView",
    "json_fingerprint",
    "message_segments",
    "tool_call_text",
]

logger = logging.getLogger("mainspring.context")

T = TypeVar("T")


def json_fingerprint(data: object) -> bytes:
    """A 16-byte blake2b digest of ``data`` as canonical JSON (sorted keys)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class MessageAdapter(Protocol[T]):
    """What the transcript needs to know about a host's message type ``T``."""

    def clone(self, message: T) -> T:
        """A copy that later changes to ``message`` do not reach."""
        ...

    def fingerprint(self, message: T) -> bytes:
        """A digest of the message's value: equal values, equal digests."""
        ...

    def role(self, message: T) -> str:
        """The message's role (``"user"``, ``"assistant"``, ``"tool"``, …)."""
        ...

    def text_segments(self, message: T) -> Sequence[str]:
        """The message's text, one string per text segment, in order."""
        ...

    def create_user(self, text: str) -> T:
        """A new user message holding ``text``."""
        ...

    def append_user_content(self, message: T, text: str) -> T:
        """A copy of the user message ``message`` with ``text`` added at its end."""
        ...


@cache
def _compact_json() -> Callable[[object], bytes]:
    from pydantic_core import to_json  # compact JSON, faster than json.dumps

    return to_json


def tool_call_text(part: ToolCallPart) -> str:
    """What a tool call counts as: its name, then its arguments as compact JSON."""
    try:
        arguments = _compact_json()(part.arguments).decode()
    except Exception:  # not JSON as pydantic sees it: as json sees it (or its error)
        arguments = json.dumps(part.arguments, ensure_ascii=False, separators=(",", ":"))
    return part.name + arguments


def message_segments(message: Message) -> list[tuple[str, str]]:
    """A mainspring message's text by source type (images are not counted)."""
    out: list[tuple[str, str]] = []
    role = message.role
    for part in message.parts:
        if isinstance(part, TextPart):
            out.append((role if role in ("user", "assistant") else "user", part.text))
        elif isinstance(part, ToolResultPart):
            out.append(("tool_result", part.content))
        elif isinstance(part, ToolCallPart):
            out.append(("tool_call", tool_call_text(part)))
        elif isinstance(part, ThinkingPart) and not part.redacted:
            out.append(("thinking", part.text))
    return out


class MainspringAdapter:
    """The adapter for :class:`mainspring.messages.Message`.

    Messages are frozen, so :meth:`clone` only copies the mutable ``meta``
    dict. The fingerprint digests the codec's JSON, ``meta`` included.
    """

    def clone(self, message: Message) -> Message:
        """A copy with its own ``meta`` dict."""
        return dataclasses.replace(message, meta=dict(message.meta))

    def fingerprint(self, message: Message) -> bytes:
        """blake2b of the codec's JSON for the message."""
        return json_fingerprint(message_to_dict(message))

    def role(self, message: Message) -> str:
        """The message's role."""
        return message.role

    def text_segments(self, message: Message) -> Sequence[str]:
        """The text of each text part."""
        return [p.text for p in message.parts if isinstance(p, TextPart)]

    def create_user(self, text: str) -> Message:
        """``Message.user(text)``."""
        return Message.user(text)

    def append_user_content(self, message: Message, text: str) -> Message:
        """A copy with one more text part at the end."""
        return dataclasses.replace(message, parts=(*message.parts, TextPart(text=text)))

    def tool_call_ids(self, message: Message) -> Sequence[str]:
        """Ids of the message's tool calls."""
        return [p.id for p in message.parts if isinstance(p, ToolCallPart)]

    def tool_result_ids(self, message: Message) -> Sequence[str]:
        """Ids the message's tool results answer."""
        return [p.tool_use_id for p in message.parts if isinstance(p, ToolResultPart)]

    def segments(self, message: Message) -> Sequence[tuple[str, str]]:
        """The message's text by source type (see :func:`message_segments`)."""
        return message_segments(message)


@dataclass(frozen=True, slots=True)
class PrefixChange:
    """A structured warning: the committed prefix changed, caches were cleared."""

    generation: int
    """The generation that starts with this change."""
    first_changed_index: int
    """The first message index whose prefix-dependent results are stale."""
    reason: str
    processor_id: str | None = None
    """Who asked for the change (for :meth:`Transcript.invalidate_prefix`)."""


class TranscriptView(Sequence[T]):
    """A read-only O(1) view of the first ``n`` committed messages.

    A new generation gives the transcript a new list, so a view taken
    earlier keeps showing what it showed.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int) -> None:
        self._items = items
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return self._items[: self._n][index]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("transcript index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        items = self._items
        for i in range(self._n):
            yield items[i]


_NO_DIGESTS: Mapping[int, bytes] = MappingProxyType({})


class Transcript(Generic[T]):
    """An append-only list of committed messages, fingerprinted when first compared."""

    _last_change: PrefixChange | None = None

    def __init__(
        self,
        adapter: MessageAdapter[T],
        messages: Iterable[T] = (),
        *,
        strict: bool = True,
        trust_message_identity: bool = False,
        on_prefix_change: Callable[[PrefixChange], None] | None = None,
    ) -> None:
        self._adapter = adapter
        self.strict = strict
        self.trust_message_identity = trust_message_identity
        self._on_prefix_change = on_prefix_change
        self._items: list[T] = []
        self._fingerprints: Mapping[int, bytes] = _NO_DIGESTS
        """Digests by index, computed on first need (append does not compute them), in a
        shared empty read-only mapping until the first one."""
        self._last_user: int | None = None
        """The last user message among ``[0, _scanned)``."""
        self._scanned = 0
        """Messages ``[0, _scanned)`` were looked at for :attr:`last_user_index`."""
        self._generation = 0
        if type(messages) not in (tuple, list) or messages:  # (a new session has none)
            self.append(messages)

    # -- reading -----------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    @property
    def last_change(self) -> PrefixChange | None:
        """The change that started the current generation (``None`` in the first)."""
        return self._last_change

    @property
    def generation(self) -> int:
        """0 at the start; one more for each accepted prefix change."""
        return self._generation

    @property
    def messages(self) -> TranscriptView[T]:
        """The committed messages, as an O(1) read-only view."""
        return TranscriptView(self._items, len(self._items))

    @property
    def backing(self) -> list[T]:
        """The list of committed messages itself, for the one owner that persists it.

        It is the transcript: it grows only through :meth:`append` (and
        :meth:`sync`); whoever holds it reads it and never changes it. A relaxed
        sync that changes the prefix starts a new list (views taken before keep
        the old one): fetch it again after a new :attr:`generation`. A strict
        transcript (the session's) never does.
        """
        return self._items

    @property
    def last_user_index(self) -> int | None:
        """The index of the last user message, if any."""
        items = self._items
        if self._scanned < len(items):
            role = self._adapter.role
            for index in range(len(items) - 1, self._scanned - 1, -1):
                if role(items[index]) == "user":
                    self._last_user = index
                    break
            self._scanned = len(items)
        return self._last_user

    # -- committing --------------------------------------------------------

    def append(self, delta: Iterable[T]) -> None:
        """Commit ``delta`` after the committed messages: O(len(delta)), a list extend."""
        self._items.extend(delta)

    def sync(self, full: Sequence[T]) -> int:
        """Bring the transcript to ``full``; returns how many messages were committed.

        Raises PrefixMutationError (strict mode) if ``full`` does not start with
        the committed messages; nothing changes then.
        """
        changed, fresh = self._find_change(full)
        if changed is None:
            start = len(self._items)
            self._extend(full, start, fresh)
            return len(full) - start
        if self.strict:
            raise PrefixMutationError(
                f"committed message {changed} changed (transcript has {len(self._items)}, "
                f"sync got {len(full)})"
            )
        self._items = self._items[:changed]  # a new list: earlier views keep theirs
        self._fingerprints = {i: d for i, d in self._fingerprints.items() if i < changed}
        self._last_user, self._scanned = None, 0
        self._extend(full, changed, fresh)
        self._start_generation(changed, "sync: committed prefix changed", None)
        return len(full) - changed

    def invalidate_prefix(self, reason: str, processor_id: str | None = None) -> PrefixChange:
        """Start a new generation for a change outside the transcript.

        The messages stay as they are; the change is reported like one found
        by :meth:`sync` (a compiler then recomputes what depends on the prefix).

        Raises PrefixMutationError in strict mode, as a changed prefix found by
        :meth:`sync` does: nothing changes then (no new generation).
        """
        if self.strict:
            raise PrefixMutationError(
                f"invalidate_prefix({reason!r}): the committed prefix may not change "
                "in strict mode (build the transcript with strict=False to allow it)"
            )
        return self._start_generation(0, reason, processor_id)

    # -- internals ---------------------------------------------------------

    def _find_change(self, full: Sequence[T]) -> tuple[int | None, dict[int, bytes]]:
        """The first changed committed index (None: none) and the digests computed."""
        items, fps = self._items, self._fingerprints
        n = len(items)
        fresh: dict[int, bytes] = {}
        if n == 0:
            return None, fresh
        if self.trust_message_identity and len(full) >= n and full[n - 1] is items[n - 1]:
            return None, fresh
        for i in range(min(n, len(full))):
            message = full[i]
            if message is items[i]:
                continue
            digest = self._adapter.fingerprint(message)
            fresh[i] = digest
            if digest != (fps.get(i) or self._digest(i)):
                return i, fresh
        if len(full) < n:
            return len(full), fresh
        return None, fresh

    def _extend(self, full: Sequence[T], start: int, fresh: dict[int, bytes]) -> None:
        self._items.extend(full[start:])
        if fresh:
            fps = self._digests()
            for i, digest in fresh.items():
                if i >= start:
                    fps[i] = digest

    def _digest(self, index: int) -> bytes:
        digest = self._fingerprints.get(index)
        if digest is None:
            digest = self._digests()[index] = self._adapter.fingerprint(self._items[index])
        return digest

    def _digests(self) -> dict[int, bytes]:
        fps = self._fingerprints
        if not isinstance(fps, dict):
            fps = self._fingerprints = {}
        return fps

    def _start_generation(
        self, first_changed: int, reason: str, processor_id: str | None
    ) -> PrefixChange:
        self._generation += 1
        change = self._last_change = PrefixChange(
            self._generation, first_changed, reason, processor_id
        )
        if self._on_prefix_change is not None:
            self._on_prefix_change(change)
        else:
            logger.warning(
                "transcript prefix changed: %s",
                reason,
                extra={"prefix_change": dataclasses.asdict(change)},
            )
        return change
