"""One compile's request, assembled from the processors' contributions and the view.

Session-scoped system text comes first and the prompt-cache breakpoint
after it; turn-scoped system text follows. First-user and last-user text is
added to those messages for this request only (overrides over the view),
and virtual-tail text becomes one trailing user message. With accounting
on, the request's segments are captured to be worked out when first read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

from mainspring.context._compilation import Compilation, Contribution
from mainspring.context._compiled import CompiledContext, CompiledMessages, deferring
from mainspring.context._tally import Accountant
from mainspring.context.snapshot import Segment
from mainspring.context.transcript import MessageAdapter
from mainspring.context.view import ModelView
from mainspring.models.base import SystemBlock, ToolSpec

__all__ = ["assemble"]

T = TypeVar("T")

_NO_SLOTS: Mapping[str, list[Contribution]] = MappingProxyType(
    {"system": [], "first-user": [], "last-user": [], "virtual-tail": []}
)
"""The contributions by slot of a compile that has none."""


def assemble(
    ctx: Compilation[T],
    view: ModelView[T],
    adapter: MessageAdapter[T],
    tools: tuple[ToolSpec, ...],
    accountant: Accountant[T] | None,
    generation: int,
) -> CompiledContext[T]:
    """The request ``ctx`` compiled over ``view`` (``accountant``: with accounting on)."""
    n = len(view)
    contributions = tuple(ctx.contributions)
    by_slot = _NO_SLOTS  # (read only: filled in a copy when there are contributions)
    system_c: list[Contribution] = []
    system: tuple[SystemBlock, ...] = ()
    stable = 0
    overrides = ctx.overrides
    first_index = view.first_user
    last_index = view.last_user
    first_text = last_text = ""
    tail: list[T] = []
    if contributions:  # (none: no instructions, no layers, no modules)
        by_slot = {slot: [] for slot in _NO_SLOTS}
        for c in contributions:
            by_slot[c.slot].append(c)
        # Session-scoped system text first: the stable prefix ends after it.
        system_c = [c for c in by_slot["system"] if c.scope == "session"]
        stable = len(system_c)
        system_c += [c for c in by_slot["system"] if c.scope == "turn"]
        system = tuple(
            SystemBlock(text=c.text, source=c.source, cache_breakpoint=(i == stable - 1))
            for i, c in enumerate(system_c)
        )
        overrides = dict(overrides)
        first_text = "\n\n".join(c.text for c in by_slot["first-user"])
        last_text = "\n\n".join(c.text for c in by_slot["last-user"])
        if first_text and first_index is not None:
            base = overrides.get(first_index, view[first_index])
            overrides[first_index] = adapter.append_user_content(base, first_text)
        if last_text and last_index is not None:
            base = overrides.get(last_index, view[last_index])
            overrides[last_index] = adapter.append_user_content(base, last_text)
        tail_c = by_slot["virtual-tail"]
        if tail_c:
            tail = [adapter.create_user("\n\n".join(c.text for c in tail_c))]
    messages = CompiledMessages(view.lend(), n, overrides, tail)
    segments: Sequence[Segment] = ()
    if accountant is not None:  # worked out when first read (see _tally)
        segments = accountant.capture(
            contributions,
            system_c,
            stable,
            tools,
            by_slot,
            (first_index, first_text),
            (last_index, last_text),
            ctx.overrides,
            ctx.override_owners,
        )
    view.mark_compiled()
    compiled: CompiledContext[T] = CompiledContext(
        system=system,
        messages=messages,
        contributions=contributions,
        turn_index=ctx.turn_index,
        step=ctx.step,
        generation=generation,
        stable_blocks=stable,
        segments=segments,
    )
    return compiled if accountant is None else deferring(compiled)
