"""The compiled request: what one compile hands to the model.

:class:`CompiledMessages` is the request's message list, an overlay on the
history view (a few entries overridden, a virtual tail, copy-on-write when
the view changes); :class:`CompiledContext` bundles it with the system
blocks, the contributions and their accounting.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from mainspring._lowlevel.frozen import fast_init
from mainspring.context._compilation import Contribution
from mainspring.context._segments import read_deferred
from mainspring.context.snapshot import Segment, Segments
from mainspring.models.base import SystemBlock

__all__ = ["CompiledContext", "CompiledMessages", "deferring"]

T = TypeVar("T")

_NONE: Mapping[int, Any] = MappingProxyType({})
"""No overrides (most requests): one read-only mapping, not an empty dict each."""


class CompiledMessages(Sequence[T]):
    """The request's messages: the view, with a few entries overridden and a tail.

    Built in O(overrides); reads are O(1) per index. It never changes: later
    view appends do not show through (the length is fixed at compile time),
    and the view edits an entry (compaction, microcompact) on a copy of the
    list this request reads (``ModelView.lend``: copy-on-write), so a request
    handed to a model stays what was sent.
    """

    __slots__ = ("_base", "_n", "_overrides", "_tail")

    def __init__(self, base: Sequence[T], n: int, overrides: Mapping[int, T], tail: Sequence[T]):
        self._base = base
        self._n = n
        self._overrides = dict(overrides) if overrides else _NONE
        self._tail = tuple(tail)

    def __len__(self) -> int:
        return self._n + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        if index >= self._n:
            return self._tail[index - self._n]
        found = self._overrides.get(index)
        return self._base[index] if found is None else found

    def __iter__(self) -> Iterator[T]:
        base, overrides = self._base, self._overrides  # (a lent list never changes)
        for i in range(self._n):
            found = overrides.get(i) if overrides else None
            yield base[i] if found is None else found
        yield from self._tail

    def __reversed__(self) -> Iterator[T]:
        yield from reversed(self._tail)
        base, overrides = self._base, self._overrides
        for i in range(self._n - 1, -1, -1):
            found = overrides.get(i) if overrides else None
            yield base[i] if found is None else found

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # list-like, unhashable

    def __repr__(self) -> str:
        return f"CompiledMessages({list(self)!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledContext(Generic[T]):
    """One compiled request: system blocks, messages and their attribution."""

    system: tuple[SystemBlock, ...]
    messages: Sequence[T]
    contributions: tuple[Contribution, ...]
    turn_index: int
    step: int
    generation: int
    stable_blocks: int
    """How many system blocks form the stable (cached) prefix."""
    segments: Sequence[Segment] = ()
    """Per source / module / processor, with accounting on (a :class:`Segments`)."""
    prefix_tokens: int = 0
    stable_tokens: int = 0

    if not TYPE_CHECKING:  # see deferring(): the figures are empty slots until first read

        def __getattr__(self, name: str) -> Any:
            return read_deferred(self, name, ("prefix_tokens", "stable_tokens"))

    @property
    def tokens(self) -> int:
        """Counted tokens of the request (0 without accounting)."""
        segments = self.segments
        if isinstance(segments, Segments):
            return segments.tokens
        return sum(s.tokens for s in segments)


def deferring(context: CompiledContext[T]) -> CompiledContext[T]:
    """``context`` with its token figures read from its deferred segments when first needed.

    (``prefix_tokens`` and ``stable_tokens``: a compile with accounting on.)
    """
    object.__delattr__(context, "prefix_tokens")
    object.__delattr__(context, "stable_tokens")
    return context


# Built at every compile: a faster constructor (the same instances).
fast_init(CompiledContext)
