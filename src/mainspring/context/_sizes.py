"""Sizes of history messages, without building their attributed pieces.

The model's history view needs the characters and tokens of every entry at
once (compaction compares the total with its budget) and where its user
messages are, but the attributed pieces only when accounting reads them.
:func:`mainspring_scan` adds up exactly what :meth:`Meter.measure` of
:func:`message_segments` counts, in one pass that also notes the user
messages, with a fast path for the common entry: one text part, counted by
the estimator.

:func:`estimate_sizing` hands the compilers that run without accounting over
mainspring messages one :class:`Sizing` per model, shared: none of it holds a
session's state, and one per session would cost every live session a meter,
a closure and its bound methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from mainspring.context.accounting import Accounting, Meter, Piece
from mainspring.context.transcript import MainspringAdapter, tool_call_text
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.tokens import EstimateTokenizer

__all__ = ["MAINSPRING_ADAPTER", "Sizing", "estimate_sizing", "mainspring_scan"]

MAINSPRING_ADAPTER = MainspringAdapter()
"""The adapter of every compiler given none (it holds no state)."""

Scan = Callable[[Sequence[Message], int], tuple[int, int, list[int]]]


@dataclass(frozen=True, slots=True)
class Sizing:
    """What a history view counts mainspring messages with: one per model, shared."""

    meter: Meter
    measure: Callable[[Message, str, str], tuple[Piece, ...]]
    """``measure(message, module, processor)``: the message's attributed pieces."""
    role: Callable[[Message], str]
    scan: Scan


_ESTIMATE = EstimateTokenizer("chars", chars_per_token=4.0)
_SIZINGS: dict[str, Sizing] = {}


def estimate_sizing(model: str) -> Sizing:
    """The shared estimate sizing of ``model``'s compilers without accounting."""
    sizing = _SIZINGS.get(model)
    if sizing is None:
        if len(_SIZINGS) >= 64:  # model names come from configuration: a few, but bound them
            _SIZINGS.clear()
        meter = Meter(Accounting(tokenizer=_ESTIMATE), model)
        segments = MAINSPRING_ADAPTER.segments

        def measure(message: Message, module: str, processor: str) -> tuple[Piece, ...]:
            return meter.measure(segments(message), module, processor)

        sizing = Sizing(meter, measure, MAINSPRING_ADAPTER.role, mainspring_scan(meter))
        _SIZINGS[model] = sizing
    return sizing


def mainspring_scan(meter: Meter, *, bound: bool = False) -> Scan:
    """``scan(messages, start) -> (chars, tokens, user indexes)`` as ``meter`` counts.

    The user indexes are positions in ``messages`` plus ``start``. With
    ``bound``, the tokens are an upper bound instead, for a tokenizer that
    makes at most one token per UTF-8 byte (tiktoken's byte-level BPE): the
    characters of an ASCII text, four per character of another.
    """
    tokenizer = meter.tokenizer
    per = tokenizer.chars_per_token if type(tokenizer) is EstimateTokenizer else 0.0
    count: Callable[[str], int] = _utf8_bound if bound else meter.count
    ceil = math.ceil

    def scan(messages: Sequence[Message], start: int) -> tuple[int, int, list[int]]:
        chars = tokens = 0
        users: list[int] = []
        for index, message in enumerate(messages, start):
            if message.role == "user":
                users.append(index)
            parts = message.parts
            if len(parts) == 1 and type(parts[0]) is TextPart:
                text = parts[0].text
                n = len(text)
                chars += n
                if per:
                    tokens += ceil(n / per)
                elif bound:  # (inline: the common entry is one text part)
                    tokens += n if text.isascii() else 4 * n
                else:
                    tokens += count(text)
                continue
            for part in parts:  # as message_segments has them, without building the list
                text_of = _TEXT_OF.get(type(part))
                counted = text_of(part) if text_of is not None else _other_text(part)
                if counted is None:
                    continue
                n = len(counted)
                chars += n
                tokens += ceil(n / per) if per else count(counted)
        return chars, tokens, users

    return scan


_TEXT_OF: dict[type, Callable[[Any], str]] = {
    ToolResultPart: attrgetter("content"),
    ToolCallPart: tool_call_text,
    TextPart: attrgetter("text"),
}
"""The counted text of a part, by its exact class (a step's calls and results, first)."""


def _other_text(part: object) -> str | None:
    """The counted text of any other part (a subclass, thinking), or ``None``."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolResultPart):
        return part.content
    if isinstance(part, ToolCallPart):
        return tool_call_text(part)
    if isinstance(part, ThinkingPart) and not part.redacted:
        return part.text
    return None


def _utf8_bound(text: str) -> int:
    """At least the UTF-8 bytes of ``text`` (a lone surrogate, passed through, takes 3)."""
    return len(text) if text.isascii() else 4 * len(text)
