"""Counting a compiled request: its segment rows and the prefix it reuses.

With accounting on, each compile's contributions become rows per source /
module / processor / slot (kept while the next compiles send the same
ones), the history adds the view's running totals, and the previous call's
system text, tools and messages tell how many leading tokens were sent
identically (the prefix a provider may serve from its cache).

A compile only captures what these figures depend on; they are worked out
when first read (deferred :class:`~mainspring.context.snapshot.Segments`),
in compile order, and at the latest before the view changes other than by
appending, so they never depend on when they are read.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mainspring._lowlevel.frozen import fast_init
from mainspring.context._compilation import Contribution
from mainspring.context._shape import CORE_MODULE
from mainspring.context.accounting import Meter, Piece
from mainspring.context.snapshot import SegmentRow, Segments
from mainspring.context.transcript import Transcript
from mainspring.context.view import ModelView
from mainspring.models.base import ToolSpec

__all__ = ["Accountant"]

T = TypeVar("T")


_Sent = tuple[
    list[Contribution],  # system contributions
    tuple[ToolSpec, ...],  # tools
    int,  # the view's length
    tuple[int | None, str],  # first user message: index, text added
    tuple[int | None, str],  # last user message: index, text added
    int,  # the transcript's generation
]
"""What a compile sent, as the next one reads it for prefix reuse (a plain tuple: cheap)."""

_NOTHING_SENT: _Sent = ([], (), 0, (None, ""), (None, ""), -1)

_Request = tuple[
    tuple[
        tuple[ToolSpec, ...], tuple[Contribution, ...]
    ],  # key: what the contributions' rows depend on
    list[Contribution],  # system_c
    int,  # stable
    Mapping[str, list[Contribution]],  # by_slot
    tuple[int | None, str],  # first user message: index, text added
    tuple[int | None, str],  # last user message: index, text added
    Mapping[int, Any],  # replaced
    Mapping[int, tuple[str, str]],  # owners
    _Sent,  # what the previous compile sent
    int,  # the transcript's generation when compiled
    int,  # the view's length when compiled
    int | None,  # the view's lowest edited index when compiled
]
"""What one compile's accounting needs, captured at compile time (a plain tuple: cheap)."""


class Accountant(Generic[T]):
    """One compiler's request accounting, worked out when first read.

    A compile captures what its figures depend on (:meth:`capture`, O(1));
    the figures are worked out on first read, in compile order, each in
    O(contributions + replacements + messages added since the previous
    one), and before the view changes other than by appending
    (:meth:`settle_all`), so they are always those of the request as
    compiled. Reads may come from any thread: settling holds a lock.
    """

    def __init__(
        self,
        meter: Meter | None,
        view: ModelView[T],
        transcript: Transcript[T],
        measure: Callable[[T, str, str], tuple[Piece, ...]],
    ) -> None:
        self.meter = meter
        self.view = view
        self.transcript = transcript
        self._measure = measure
        self._prev: _Sent = _NOTHING_SENT
        self._tools_piece: tuple[tuple[ToolSpec, ...], Piece] | None = None
        self._tally: _Tally | None = None
        self._slots: dict[str, _Slot] = {}
        """Each slot's last counted contributions (see :meth:`_count_contributions`)."""
        self._queue: deque[tuple[weakref.ref[Segments], _Request]] = deque()
        """Deferred segments not settled yet, in compile order."""
        self._live = 0
        """Live entries of the queue at its last pruning."""
        self._lock = threading.Lock()
        if meter is not None:
            view.before_edit(self.settle_all)

    def capture(
        self,
        contributions: tuple[Contribution, ...],
        system_c: list[Contribution],
        stable: int,
        tools: tuple[ToolSpec, ...],
        by_slot: Mapping[str, list[Contribution]],
        first: tuple[int | None, str],
        last: tuple[int | None, str],
        replaced: Mapping[int, T],
        owners: Mapping[int, tuple[str, str]],
    ) -> Segments:
        """The request's deferred segments: O(1) now, worked out when first read.

        ``first`` / ``last`` are the first and last user messages' indexes with
        the text added to them. The next compile's prefix reuse is counted
        against this one.
        """
        view = self.view
        n = len(view)
        generation = self.transcript.generation
        request: _Request = (
            (tools, contributions),
            system_c,
            stable,
            by_slot,
            first,
            last,
            replaced,
            owners,
            self._prev,
            generation,
            n,
            view.min_changed,
        )
        self._prev = (system_c, tools, n, first, last, generation)
        segments = Segments.deferred(self)
        queue = self._queue
        queue.append((weakref.ref(segments), request))
        if len(queue) > 2 * self._live + 64:  # drop the requests nobody keeps (amortized O(1))
            with self._lock:
                kept = [entry for entry in self._queue if entry[0]() is not None]
                self._queue = deque(kept)
                self._live = len(kept)
        return segments

    def settle(self, segments: Segments) -> None:
        """Work out ``segments`` (and every request compiled before it, first)."""
        with self._lock:
            if segments.settled:
                return
            queue = self._queue
            while queue:
                ref, request = queue[0]
                found = ref()
                if found is not None and not found.settled:
                    self._settle(found, request)  # a failure leaves it queued, for the next read
                queue.popleft()
                if found is segments:
                    return
            if not segments.settled:  # (not queued: cannot happen, but never answer wrong)
                raise RuntimeError("deferred segments lost their place in the queue")

    def settle_all(self) -> None:
        """Work out every deferred request (the view is about to change)."""
        with self._lock:
            queue = self._queue
            while queue:
                ref, request = queue[0]
                found = ref()
                if found is not None and not found.settled:
                    self._settle(found, request)
                queue.popleft()
            self._live = 0

    def _settle(self, segments: Segments, request: _Request) -> None:
        meter = self.meter
        assert meter is not None
        key, system_c, stable, by_slot, first, last, replaced, owners, prev, gen, n, changed = (
            request
        )
        tally = self._tally
        if tally is None or tally.key != key:  # mostly the very objects of the last compile
            tally = self._tally = self._count_contributions(key, system_c, stable, by_slot)
        view = self.view
        if owners or meter.include_content:
            rows = _kept(
                _history_rows(
                    self._replacement_pieces(replaced, owners),
                    view,
                    n,
                    include_content=meter.include_content,
                )
            )
        else:  # the usual compile: the view's totals as they are
            rows = _plain_history(view, n)
        reused = _reuse(prev, gen, key[0], system_c, tally.head_tokens)
        if reused is not None:
            bound = _message_bound(prev, n, changed, first, last, replaced)
            reused += view.tokens_before(bound)
        history, chars, tokens = rows
        segments.fill_summed(
            tally.rows + history,
            chars=tally.chars + chars,
            tokens=tally.tokens + tokens,
            prefix_tokens=reused or 0,
            stable_tokens=tally.stable_tokens,
        )

    def _count_contributions(
        self,
        key: tuple[tuple[ToolSpec, ...], tuple[Contribution, ...]],
        system_c: list[Contribution],
        stable: int,
        by_slot: Mapping[str, list[Contribution]],
    ) -> _Tally:
        """The contributions' rows, slot by slot (a slot sending what it sent last is reused).

        Rows never group across slots (the slot is part of a row's key), so
        the rows of each slot, in slot order, are those of all the pieces.
        """
        meter = self.meter
        assert meter is not None
        tools = key[0]
        rows: list[SegmentRow] = []
        tools_tokens = 0
        if tools:
            if self._tools_piece is None or self._tools_piece[0] != tools:
                text = "".join(t.name + t.description + str(t.input_schema) for t in tools)
                self._tools_piece = (
                    tools,
                    meter.piece("tools", CORE_MODULE, "tools", "tools", text),
                )
            tools_piece = self._tools_piece[1]
            tools_tokens = tools_piece.tokens
            rows.extend(_grouped((tools_piece,)))
        slots = self._slots
        system = slots.get("system")
        if system is None or system[0] != system_c or system[3] != stable:
            system = slots["system"] = self._slot("system", system_c, stable)
        rows.extend(system[1])
        for slot in ("first-user", "last-user", "virtual-tail"):
            made = by_slot[slot]
            found = slots.get(slot)
            if found is None or found[0] != made:
                found = slots[slot] = self._slot(slot, made, 0)
            rows.extend(found[1])
        kept, chars, tokens = _kept(rows)
        return _Tally(key, kept, chars, tokens, tools_tokens + system[2], tools_tokens + system[4])

    def _slot(self, slot: str, made: list[Contribution], stable: int) -> _Slot:
        """One slot's contributions counted: (them, rows, first ``stable`` tokens, stable, all)."""
        meter = self.meter
        assert meter is not None
        piece = meter.piece
        pieces = [piece(c.source, c.module, c.processor, slot, c.text) for c in made]
        return (
            list(made),
            _grouped(pieces),
            sum(p.tokens for p in pieces[:stable]),
            stable,
            sum(p.tokens for p in pieces),
        )

    def _replacement_pieces(
        self, replaced: Mapping[int, T], owners: Mapping[int, tuple[str, str]]
    ) -> list[Piece]:
        """A turn-only replacement is counted instead of the view entry."""
        if not owners:
            return []
        view = self.view
        pieces: list[Piece] = []
        for index, (module, processor) in sorted(owners.items()):
            pieces.extend(_negated(p) for p in view.pieces(index))
            pieces.extend(self._measure(replaced[index], module, processor))
        return pieces


def _reuse(
    prev: _Sent,
    generation: int,
    tools: tuple[ToolSpec, ...],
    system_c: list[Contribution],
    head_tokens: int,
) -> int | None:
    """Reused tokens of tools and system; None when something before the messages changed."""
    sent, sent_tools, _, _, _, sent_generation = prev
    if sent_generation != generation:
        return None
    if (tools or sent_tools) and sent_tools != tools:
        return None
    if len(sent) != len(system_c):
        return None
    for old, c in zip(sent, system_c, strict=True):
        if old is not c and old.text != c.text:
            return None
    return head_tokens


def _message_bound(
    prev: _Sent,
    n: int,
    min_changed: int | None,
    first: tuple[int | None, str],
    last: tuple[int | None, str],
    replaced: Mapping[int, Any],
) -> int:
    """How many leading view messages (of ``n``) the previous call sent identically."""
    _, _, sent_len, sent_first, sent_last, _ = prev
    bound = min(sent_len, n)
    if min_changed is not None:
        bound = min(bound, min_changed)
    for (old_index, old_text), (index, text) in ((sent_last, last), (sent_first, first)):
        had = bool(old_text) and old_index is not None
        has = bool(text) and index is not None
        if had == has and (not has or (old_index == index and old_text == text)):
            continue  # (both without added text, or the same text at the same index)
        if had:
            assert old_index is not None
            bound = min(bound, old_index)
        if has:
            assert index is not None
            bound = min(bound, index)
    for index in replaced:
        bound = min(bound, index)
    return bound


def _negated(p: Piece) -> Piece:
    return Piece(p.source, p.module, p.processor, p.slot, -p.chars, -p.tokens)


@dataclass(frozen=True, slots=True)
class _Tally:
    """A compile's counted contributions, kept while the next compiles send the same."""

    key: tuple[tuple[ToolSpec, ...], tuple[Contribution, ...]]
    """(tools, contributions): what the rows depend on."""
    rows: tuple[SegmentRow, ...]
    """The contributions' rows (tools, system, user slots, tail), none empty."""
    chars: int
    tokens: int
    """The rows' sums."""
    stable_tokens: int
    """Tools and system blocks before the prompt-cache breakpoint."""
    head_tokens: int
    """Tools and every system block: what a call reuses when they did not change."""


fast_init(_Tally)  # made whenever a compile's contributions differ from the last one's

_Slot = tuple[list[Contribution], tuple[SegmentRow, ...], int, int, int]
"""One slot's counted contributions: them, their rows, the tokens of the first ``stable``
of them, ``stable``, and all their tokens."""


def _grouped(pieces: Sequence[Piece]) -> tuple[SegmentRow, ...]:
    """The pieces' rows: grouped by (source, module, processor, slot), in first-seen order."""
    if len(pieces) == 1:  # (the usual slot: one contribution)
        p = pieces[0]
        return ((p.source, p.module, p.processor, p.slot, p.chars, p.tokens, p.content),)
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    contents: dict[tuple[str, str, str, str], list[str]] = {}
    for p in pieces:
        _group(grouped, contents, p)
    return _rows(grouped, contents)


def _kept(rows: Sequence[SegmentRow]) -> tuple[tuple[SegmentRow, ...], int, int]:
    """The rows with chars or tokens, and their sums (chars, tokens)."""
    kept: list[SegmentRow] = []
    chars = tokens = 0
    for row in rows:
        if row[4] or row[5]:
            kept.append(row)
            chars += row[4]
            tokens += row[5]
    return tuple(kept), chars, tokens


def _plain_history(view: ModelView[Any], n: int) -> tuple[tuple[SegmentRow, ...], int, int]:
    """The view's totals of ``[0, n)`` as history rows, and their sums.

    For a compile with no turn-only replacement and no kept text.
    """
    kept: list[SegmentRow] = []
    chars = tokens = 0
    for (source, module, processor), (c, t) in view.totals_upto(n).items():
        if c or t:
            kept.append((source, module, processor, "history", c, t, None))
            chars += c
            tokens += t
    return tuple(kept), chars, tokens


def _group(
    grouped: dict[tuple[str, str, str, str], list[int]],
    contents: dict[tuple[str, str, str, str], list[str]],
    p: Piece,
) -> None:
    key = (p.source, p.module, p.processor, p.slot)
    entry = grouped.get(key)
    if entry is None:
        grouped[key] = [p.chars, p.tokens]
    else:
        entry[0] += p.chars
        entry[1] += p.tokens
    if p.content is not None:
        contents.setdefault(key, []).append(p.content)


def _rows(
    grouped: dict[tuple[str, str, str, str], list[int]],
    contents: dict[tuple[str, str, str, str], list[str]],
) -> tuple[SegmentRow, ...]:
    rows: list[SegmentRow] = []
    for key, (chars, tokens) in grouped.items():
        texts = contents.get(key)
        rows.append((*key, chars, tokens, "\n".join(texts) if texts is not None else None))
    return tuple(rows)


def _history_rows(
    pieces: list[Piece], view: ModelView[Any], n: int, *, include_content: bool
) -> Sequence[SegmentRow]:
    """Rows for the history: turn-only replacement pieces, then the view's totals of ``[0, n)``.

    Every figure is as of the compile (no view edit since; see Accountant).
    """
    totals = view.totals_upto(n)
    if not pieces and not include_content:  # the usual compile: the totals as they are
        return [
            (source, module, processor, "history", chars, tokens, None)
            for (source, module, processor), (chars, tokens) in totals.items()
        ]
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    contents: dict[tuple[str, str, str, str], list[str]] = {}
    for p in pieces:
        _group(grouped, contents, p)
    if include_content:
        for index in range(n):
            for p in view.pieces(index):
                if p.content is not None:
                    contents.setdefault((p.source, p.module, p.processor, "history"), []).append(
                        p.content
                    )
    for (source, module, processor), (chars, tokens) in totals.items():
        key = (source, module, processor, "history")
        entry = grouped.get(key)
        if entry is None:
            grouped[key] = [chars, tokens]
        else:
            entry[0] += chars
            entry[1] += tokens
    return _rows(grouped, contents)
