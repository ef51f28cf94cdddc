"""What the context compilers of one configuration share, worked out once.

An agent builds a context compiler for every session, and most of what a
compiler is made of does not depend on the session: the adapter, the
services and config, the transcript's flags, how the history view counts
its entries (the shared estimate sizing, or the adapter's own scan and
measure). A :class:`CompilerShape` holds those, read-only; each compiler adds
only its own mutable parts (transcript, view, the processors that keep
state, its turn records, a meter of its own with accounting on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

from mainspring.context._sizes import MAINSPRING_ADAPTER, estimate_sizing, mainspring_scan
from mainspring.context.accounting import Accounting, Meter, Piece, SegmentLookup
from mainspring.context.pipeline import Module, Processor, order_processors
from mainspring.context.transcript import MainspringAdapter, MessageAdapter, PrefixChange
from mainspring.errors import ConfigError
from mainspring.tokens import TiktokenTokenizer

__all__ = ["CORE_MODULE", "CompilerShape", "Deferral", "ViewParts", "run_order"]

T = TypeVar("T")

CORE_MODULE = "core"
"""The module of the processors a compiler is given outside any module (an agent's
own), and of the request's tool definitions in its accounting."""

_NOTHING: Mapping[str, Any] = MappingProxyType({})
"""No services, no config: one read-only mapping shared by the compilers given none."""

Measure = Callable[[T, str, str], tuple[Piece, ...]]
ViewParts = tuple[
    Measure[T],
    Callable[[T], str],
    Callable[[Sequence[T], int], tuple[int, int, list[int]]] | None,
    Callable[[Sequence[T]], int] | None,
]
"""A history view's ``(measure, role, scan, count)`` (see :class:`ModelView`)."""


class CompilerShape(Generic[T]):
    """The parts of a context compiler that no session changes, shared by many.

    ``ContextCompiler(...)`` makes one of its own from its arguments; an
    agent keeps one for all its sessions (see :mod:`mainspring.context._plan`).
    """

    __slots__ = (
        "accounting",
        "adapter",
        "config",
        "model",
        "on_prefix_change",
        "retain_turns",
        "segmenter",
        "services",
        "sizer",
        "strict",
        "trust_message_identity",
        "view_parts",
    )

    def __init__(
        self,
        *,
        adapter: MessageAdapter[T] | None = None,
        services: Mapping[str, Any] | None = None,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        strict: bool = True,
        trust_message_identity: bool = False,
        on_prefix_change: Callable[[PrefixChange], None] | None = None,
        accounting: Accounting | None = None,
        model: str = "",
        retain_turns: int | None = None,
    ) -> None:
        """Check and keep the arguments (a ConfigError for ``retain_turns`` below 1)."""
        if retain_turns is not None and retain_turns < 1:
            raise ConfigError("retain_turns must be at least 1 (or None to keep every turn)")
        self.adapter: MessageAdapter[T] = adapter or cast("MessageAdapter[T]", MAINSPRING_ADAPTER)
        self.services: Mapping[str, Any] = dict(services) if services else _NOTHING
        self.config: Mapping[str, Mapping[str, Any]] = (
            {k: dict(v) for k, v in config.items()} if config else _NOTHING
        )
        self.strict = strict
        self.trust_message_identity = trust_message_identity
        self.on_prefix_change = on_prefix_change
        self.accounting = accounting
        self.model = model
        self.retain_turns = retain_turns
        sizing = estimate_sizing(model)
        self.sizer: Meter = sizing.meter
        """Counts the view without accounting (compaction needs sizes): shared per model."""
        self.segmenter: SegmentLookup | None = (
            cast("SegmentLookup", self.adapter) if _segments_itself(self.adapter) else None
        )
        self.view_parts: ViewParts[T]
        """The history view's parts without accounting (one set for every compiler)."""
        if self.adapter is cast(object, MAINSPRING_ADAPTER):  # the shared sizing's own
            self.view_parts = cast("ViewParts[T]", (sizing.measure, sizing.role, sizing.scan, None))
        else:
            self.view_parts = self.view_parts_for(self.sizer)

    def measure_for(self, meter: Meter) -> Measure[T]:
        """``measure(message, module, processor)``: a message's pieces as ``meter`` counts."""
        segmenter, adapter = self.segmenter, self.adapter

        def measure(message: T, module: str, processor: str) -> tuple[Piece, ...]:
            if segmenter is not None:
                segments = segmenter.segments(message)
            else:
                role = adapter.role(message)
                segments = [(role, text) for text in adapter.text_segments(message)]
            return meter.measure(segments, module, processor)

        return measure

    def view_parts_for(self, meter: Meter) -> ViewParts[T]:
        """A history view's parts counting with ``meter``.

        Mainspring messages get a direct scan; with tiktoken it bounds the
        tokens, and the view counts them exactly when read.
        """
        measure, role = self.measure_for(meter), self.adapter.role
        kind: type = type(self.adapter)
        if not (
            issubclass(kind, MainspringAdapter)
            and kind.segments is _MS_SEGMENTS
            and kind.role is _MS_ROLE
        ):
            return measure, role, None, None
        exact = mainspring_scan(meter)
        if not isinstance(meter.tokenizer, TiktokenTokenizer):
            return measure, role, cast("Any", exact), None
        bound = mainspring_scan(meter, bound=True)
        return measure, role, cast("Any", bound), cast("Any", lambda run: exact(run, 0)[1])


Made = tuple[tuple[Processor, ...], tuple[Module, ...] | None]
"""A compiler's processors in run order, and its modules (``None``: one plain module of them)."""


class Deferral:
    """Processors a compiler makes only when it first needs them, shared by many compilers.

    Budget processors (microcompact, compaction) do nothing while the history
    view is small, and most sessions never grow past that: a compiler given a
    deferral runs the processors it was given (the others) and calls
    :attr:`make` for all of them, its own, only once the view holds more than
    :attr:`within` tokens, or when its processors or modules are read. Read-only.

    The contract: while the view is within :attr:`within`, the processors only
    ``make`` adds change nothing, and a run of messages they map changes no
    message (they keep it, to look at once past the threshold); the others map
    no messages. The compiler then hands the new mappers the transcript so far
    in one run, as their runs would have added up to.
    """

    __slots__ = ("make", "within")

    def __init__(self, within: float, make: Callable[[], Made]) -> None:
        """Make the processors with ``make`` once the view passes ``within`` tokens."""
        self.within = within
        self.make = make


def run_order(modules: Sequence[Module]) -> tuple[Processor, ...]:
    """The modules' processors in run order, each told its module's name.

    A single module's own tuple is returned when it is already in order.
    """
    everything: list[Processor] = []
    for module in modules:
        for proc in module.processors():
            proc.module = module.name
            everything.append(proc)
    ordered = tuple(order_processors(everything))
    given = modules[0].processors() if len(modules) == 1 else None
    return given if isinstance(given, tuple) and given == ordered else ordered


_SEGMENTERS: dict[type, bool] = {}
_MS_SEGMENTS = MainspringAdapter.segments
_MS_ROLE = MainspringAdapter.role


def _segments_itself(adapter: object) -> bool:
    """Whether the adapter is a SegmentLookup (cached by class: a protocol check is slow)."""
    kind = type(adapter)
    found = _SEGMENTERS.get(kind)
    if found is None:
        found = _SEGMENTERS[kind] = isinstance(adapter, SegmentLookup)
    return found
