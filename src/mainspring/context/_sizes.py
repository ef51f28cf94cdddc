"""Sizes of history messages, without building their attributed pieces.

The model's history view needs the characters and tokens of every entry at
once (compaction compares the total with its budget) and where its user
messages are, but the attributed pieces only when accounting reads them.
:func:`mainspring_scan` adds up exactly what :meth:`Meter.measure` of
:func:`message_segments` counts, in one pass that also notes the user
messages, with a fast path for the common entry: one text part, counted by
the estimator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mainspring.context.accounting import Meter
from mainspring.context.transcript import tool_call_text
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.tokens import EstimateTokenizer

__all__ = ["mainspring_scan"]


def mainspring_scan(
    meter: Meter, *, bound: bool = False
) -> Callable[[Sequence[Message], int], tuple[int, int, list[int]]]:
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
                if isinstance(part, TextPart):
                    text = part.text
                elif isinstance(part, ToolResultPart):
                    text = part.content
                elif isinstance(part, ToolCallPart):
                    text = tool_call_text(part)
                elif isinstance(part, ThinkingPart) and not part.redacted:
                    text = part.text
                else:
                    continue
                n = len(text)
                chars += n
                tokens += ceil(n / per) if per else count(text)
        return chars, tokens, users

    return scan


def _utf8_bound(text: str) -> int:
    """At least the UTF-8 bytes of ``text`` (a lone surrogate, passed through, takes 3)."""
    return len(text) if text.isascii() else 4 * len(text)
