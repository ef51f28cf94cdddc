"""Token accounting: counting each attributed piece of a request.

:class:`Accounting` is the opt-in configuration (tokenizer, sinks, whether
raw text may enter snapshots, strict sinks). :class:`Meter` does the counting
for one compiler: a message is measured once, when it enters the model's
history view, into :class:`Piece` s keyed by source / module / processor; a
contribution is measured when it is made. Counts go through a
:class:`~mainspring.tokens.CountCache` keyed by (tokenizer, model, framing,
digest), so a warm compile only adds up cached numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mainspring._lowlevel.frozen import fast_init
from mainspring.context.sinks import SnapshotSink
from mainspring.context.transcript import message_segments
from mainspring.tokens import CountCache, Tokenizer, tokenizer_for

__all__ = ["Accounting", "Meter", "Piece", "SegmentLookup", "message_segments"]


@runtime_checkable
class SegmentLookup(Protocol):
    """Optional adapter part: a message's text split by source type."""

    def segments(self, message: Any) -> Sequence[tuple[str, str]]:
        """``(source, text)`` pairs (user, assistant, tool_call, tool_result, thinking)."""
        ...


@dataclass(frozen=True, slots=True)
class Piece:
    """Counted text: where it came from, its size, and (maybe) the text."""

    source: str
    module: str
    processor: str
    slot: str
    chars: int
    tokens: int
    content: str | None = None


fast_init(Piece)  # made for each history message accounting counts


@dataclass(kw_only=True)
class Accounting:
    """Opt-in token accounting for a context compiler.

    ``tokenizer`` defaults to the one :func:`~mainspring.tokens.tokenizer_for`
    picks for the first model compiled for (exact tiktoken for OpenAI models,
    a labelled estimate for others), fixed for the compiler's life so history
    counts stay comparable.
    """

    tokenizer: Tokenizer | None = None
    sinks: Sequence[SnapshotSink] = ()
    include_content: bool = False
    """Keep raw text in snapshot segments (off: snapshots hold no text)."""
    strict: bool = False
    """A failing sink raises TelemetryError instead of being logged and skipped."""
    cache: CountCache = field(default_factory=CountCache)


class Meter:
    """Counts text for one compiler with one tokenizer and a shared cache."""

    __slots__ = ("_counts", "_exact", "_memo", "cache", "include_content", "model", "tokenizer")

    MEMO_SIZE = 512
    """Recent contribution pieces kept whole (session-scoped text repeats every compile)."""
    COUNTS_SIZE = 4096
    """Recent texts' counts kept by the text itself, before the shared cache's digest."""

    def __init__(self, accounting: Accounting, model: str) -> None:
        """Fix the tokenizer (given, or chosen for ``model``)."""
        self.tokenizer = accounting.tokenizer or tokenizer_for(model or "unknown")
        self.cache = accounting.cache
        self.include_content = accounting.include_content
        self.model = model
        self._exact = self.tokenizer.exact
        self._memo: dict[tuple[str, str, str, str, str], Piece] = {}
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens in ``text`` (cached by digest; recent texts by the text itself)."""
        if not text:
            return 0
        if not self._exact:  # an estimate is cheaper than the cache's digest
            return self.tokenizer.count(text)
        counts = self._counts
        found = counts.get(text)  # a str caches its hash: no digest for a text seen again
        if found is None:
            if len(counts) >= self.COUNTS_SIZE:
                counts.clear()
            found = counts[text] = self.cache.count(self.tokenizer, text, model=self.model)
        return found

    def piece(self, source: str, module: str, processor: str, slot: str, text: str) -> Piece:
        """Measure one attributed text (recent ones are remembered whole)."""
        key = (source, module, processor, slot, text)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            found = self._memo[key] = self._piece(source, module, processor, slot, text)
        return found

    def _piece(self, source: str, module: str, processor: str, slot: str, text: str) -> Piece:
        return Piece(
            source,
            module,
            processor,
            slot,
            len(text),
            self.count(text),
            text if self.include_content else None,
        )

    def measure(
        self, segments: Sequence[tuple[str, str]], module: str, processor: str
    ) -> tuple[Piece, ...]:
        """Measure a history message given as ``(source, text)`` pairs."""
        if len(segments) == 1:  # the common message: one text (no generator for it)
            source, text = segments[0]
            return (self._piece(source, module, processor, "history", text),)
        return tuple(self._piece(src, module, processor, "history", text) for src, text in segments)
