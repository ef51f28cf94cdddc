"""A request's segments: its attributed pieces, as rows, built into objects on first read.

:class:`Segments` is what a compile hands out as ``segments``; with
accounting on it is *deferred* (:meth:`Segments.deferred`): its rows and
figures come from a :class:`Pending` source on first read. Re-exported by
:mod:`mainspring.context.snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload

__all__ = [
    "Pending",
    "Segment",
    "SegmentRow",
    "Segments",
    "read_deferred",
    "segment_tokens_by_source",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One attributed piece of a request."""

    source: str
    """What kind of content: system, context, memory, skill, user, assistant,
    tool_call, tool_result, thinking, tools, tail, …"""
    module: str
    """The module that contributed it (``"transcript"`` for history)."""
    processor: str
    """The processor that contributed or last rewrote it."""
    slot: str
    """Where it sits: system, first-user, last-user, virtual-tail, history, tools."""
    chars: int
    tokens: int
    share: float = 0.0
    """Its fraction of the request's tokens (0 to 1)."""
    content: str | None = None
    """The raw text, only with ``include_content=True``."""

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (``content`` only when kept)."""
        data: dict[str, Any] = {
            "source": self.source,
            "module": self.module,
            "processor": self.processor,
            "slot": self.slot,
            "chars": self.chars,
            "tokens": self.tokens,
            "share": self.share,
        }
        if self.content is not None:
            data["content"] = self.content
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segment:
        """Read what :meth:`to_dict` wrote."""
        return cls(
            source=str(data["source"]),
            module=str(data["module"]),
            processor=str(data["processor"]),
            slot=str(data["slot"]),
            chars=int(data["chars"]),
            tokens=int(data["tokens"]),
            share=float(data.get("share", 0.0)),
            content=data.get("content"),
        )


SegmentRow = tuple[str, str, str, str, int, int, str | None]
"""A segment as plain data: (source, module, processor, slot, chars, tokens, content)."""


class Pending(Protocol):
    """Where deferred :class:`Segments` get their figures (the compiler's request accounting)."""

    def settle(self, segments: Segments) -> None:
        """Give ``segments`` its figures (:meth:`Segments.fill`), as of when it was made."""
        ...


_DEFERRED = frozenset({"_rows", "chars", "tokens", "prefix_tokens", "stable_tokens"})
_FIGURES = {"chars": 0, "tokens": 1, "prefix_tokens": 2, "stable_tokens": 3}
"""Where :meth:`Segments.figures` answers each figure."""


class Segments(Sequence[Segment]):
    """A request's segments, kept as rows; the :class:`Segment` objects are built on first read.

    A compile yields one per request, and most are only summed (``tokens``,
    ``chars``, tokens per source), so the figures stay plain numbers until
    someone indexes or iterates. Immutable; compares equal to (and hashes
    like) the tuple of its segments. ``share`` is each row's tokens over the
    request's tokens.

    A compile with accounting on hands out *deferred* segments: their rows
    and figures are worked out on first read, from what the compile
    captured, and are those of the request as it was compiled whenever they
    are read (see :meth:`deferred`).
    """

    __slots__ = (
        "__weakref__",
        "_built",
        "_pending",
        "_rows",
        "chars",
        "prefix_tokens",
        "stable_tokens",
        "tokens",
    )

    tokens: int
    """Sum of the segments' tokens."""
    chars: int
    """Sum of the segments' characters."""
    prefix_tokens: int
    """A compiled request's tokens that the session's previous call sent in the same
    position (0 for segments built from rows)."""
    stable_tokens: int
    """A compiled request's tokens before the prompt-cache breakpoint (0 from rows)."""

    def __init__(self, rows: Iterable[SegmentRow] = ()) -> None:
        """Keep ``rows`` (in order); rows with neither chars nor tokens are dropped."""
        self._pending: Pending | None = None
        self._keep((), 0, 0, rows)

    @classmethod
    def deferred(cls, pending: Pending) -> Segments:
        """Segments whose figures ``pending.settle`` gives on first read (a compile's).

        ``pending`` must answer with the figures of the moment these were made,
        whenever it is asked, from any thread.
        """
        made = object.__new__(cls)
        _set_pending(made, pending)
        _set_built(made, None)
        return made

    def fill(
        self,
        rows: Iterable[SegmentRow],
        *,
        prefix_tokens: int = 0,
        stable_tokens: int = 0,
    ) -> None:
        """Give deferred segments their rows and figures (once; their pending source calls it)."""
        if self._pending is None:
            raise ValueError("these segments already have their figures")
        self._keep((), 0, 0, rows, prefix_tokens, stable_tokens)
        self._pending = None

    def fill_summed(
        self,
        rows: tuple[SegmentRow, ...],
        *,
        chars: int,
        tokens: int,
        prefix_tokens: int = 0,
        stable_tokens: int = 0,
    ) -> None:
        """:meth:`fill` with rows already checked (none empty) and their sums worked out.

        For a pending source that builds the rows itself (the compiler's): no
        second pass over them. ``chars`` and ``tokens`` must be the rows' sums.
        """
        if self._pending is None:
            raise ValueError("these segments already have their figures")
        _set_built(self, None)
        self.chars = chars
        self.tokens = tokens
        self.prefix_tokens = prefix_tokens
        self.stable_tokens = stable_tokens
        self._rows = rows  # last: it marks them settled
        self._pending = None

    def figures(self) -> tuple[int, int, int, int]:
        """``(chars, tokens, prefix_tokens, stable_tokens)``, worked out if deferred."""
        pending = self._pending
        if pending is not None:
            pending.settle(self)
        return self.chars, self.tokens, self.prefix_tokens, self.stable_tokens

    @property
    def settled(self) -> bool:
        """Whether the figures are worked out (always, unless :meth:`deferred`)."""
        return self._pending is None

    if not TYPE_CHECKING:  # a deferred instance's slots are empty until first read

        def __getattr__(self, name: str) -> Any:
            pending = self._pending
            if pending is None or name not in _DEFERRED:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
                )
            pending.settle(self)
            return object.__getattribute__(self, name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_segments_from, (self._rows, self.prefix_tokens, self.stable_tokens))

    def plus(self, rows: Iterable[SegmentRow]) -> Segments:
        """These segments followed by ``rows`` (empty rows dropped), without re-reading these."""
        joined = object.__new__(Segments)
        joined._pending = None
        joined._keep(self._rows, self.chars, self.tokens, rows)
        return joined

    def _keep(
        self,
        head: tuple[SegmentRow, ...],
        chars: int,
        tokens: int,
        rows: Iterable[SegmentRow],
        prefix_tokens: int = 0,
        stable_tokens: int = 0,
    ) -> None:
        kept: list[SegmentRow] = []
        for row in rows:
            if len(row) != 7:
                raise ValueError(
                    f"a segment row is (source, module, processor, slot, chars, tokens, "
                    f"content), got {row!r}"
                )
            if row[4] or row[5]:
                kept.append(row)
                chars += row[4]
                tokens += row[5]
        self._built: tuple[Segment, ...] | None = None
        self.chars = chars
        self.tokens = tokens
        self.prefix_tokens = prefix_tokens
        self.stable_tokens = stable_tokens
        self._rows = head + tuple(kept) if head else tuple(kept)  # last: it marks them settled

    @property
    def rows(self) -> tuple[SegmentRow, ...]:
        """The segments as plain rows, in order."""
        if self._pending is not None:  # (settled here: no failed slot read first)
            self._pending.settle(self)
        return self._rows

    def by_source(self, into: dict[str, int] | None = None) -> dict[str, int]:
        """Tokens per source, added to ``into`` (a new dict by default)."""
        if self._pending is not None:
            self._pending.settle(self)
        totals = {} if into is None else into
        get = totals.get
        for row in self._rows:
            source = row[0]
            totals[source] = get(source, 0) + row[5]
        return totals

    def _segments(self) -> tuple[Segment, ...]:
        built = self._built
        if built is None:
            if self._pending is not None:
                self._pending.settle(self)
            rows = self._rows
            total = self.tokens or 1
            built = self._built = tuple(
                Segment(
                    source=source,
                    module=module,
                    processor=processor,
                    slot=slot,
                    chars=chars,
                    tokens=tokens,
                    share=tokens / total,
                    content=content,
                )
                for source, module, processor, slot, chars, tokens, content in rows
            )
        return built

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Segment: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Segment, ...]: ...
    def __getitem__(self, index: int | slice) -> Segment | tuple[Segment, ...]:
        return self._segments()[index]

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Segments):
            return self._rows == other._rows
        if isinstance(other, tuple):  # it stands in for a tuple of segments
            return len(other) == len(self._rows) and self._segments() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._segments())

    def __repr__(self) -> str:
        return f"Segments({list(self._segments())!r})"


_set_pending = vars(Segments)["_pending"].__set__  # the slots' own setters
_set_built = vars(Segments)["_built"].__set__


def _segments_from(
    rows: tuple[SegmentRow, ...], prefix_tokens: int, stable_tokens: int
) -> Segments:
    """Unpickle :class:`Segments` (settled: a pickle holds figures, never their source)."""
    made = Segments(rows)
    made.prefix_tokens = prefix_tokens
    made.stable_tokens = stable_tokens
    return made


def segment_tokens_by_source(segments: Sequence[Segment], into: dict[str, int]) -> None:
    """Add each segment's tokens to ``into`` by source (rows only, for :class:`Segments`)."""
    if isinstance(segments, Segments):
        segments.by_source(into)
        return
    for seg in segments:
        into[seg.source] = into.get(seg.source, 0) + seg.tokens


def read_deferred(obj: object, name: str, deferred: Iterable[str]) -> Any:
    """``obj.name`` for a frozen, slotted object whose figures its ``segments`` defer.

    For the ``__getattr__`` of such an object (a figure is an empty slot until
    first read): the figure is read from its deferred :class:`Segments` and
    stored in the slot, so later reads are plain attributes.
    """
    if name in deferred:
        segments = object.__getattribute__(obj, "segments")
        if isinstance(segments, Segments):
            figures = segments.figures()
            for each in deferred:  # every figure at once: one failed slot read per object
                object.__setattr__(obj, each, figures[_FIGURES[each]])
            return figures[_FIGURES[name]]
    raise AttributeError(
        f"{type(obj).__name__!r} object has no attribute {name!r}", name=name, obj=obj
    )
