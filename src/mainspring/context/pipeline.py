"""Processors: the phased, attributed steps that turn a transcript into a request.

Every compile runs the registered processors phase by phase::

    sanitize → history → system → stable-context → user-augmentation
             → virtual-tail → transform → content → finalize

Inside a phase, ``before`` / ``after`` (processor ids) order them; otherwise
registration order holds. A cycle is rejected when the processors are
registered (:class:`~mainspring.errors.ProcessorCycleError`).

A processor *contributes* text to a slot — ``system``, ``first-user``,
``last-user`` or ``virtual-tail`` — and each :class:`Contribution` carries
its source type (system, context, memory, skill, …), module and processor, so
every token of a request can be attributed. Sanitize and history processors
can also map each committed message as it arrives (:meth:`Processor.map_message`,
incremental) and edit the model's history view (compaction).

A processor's cache scope is ``"session"`` — computed once per transcript
generation and replayed, so it forms the stable, cached prefix; it may only
contribute (a structural change raises :class:`~mainspring.errors.ProcessorScopeError`)
— or ``"turn"``: run at every compile.

A :class:`Module` groups processors and gets the compiler's services and its
initial config at setup; modules are torn down in reverse order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, get_args

from mainspring.context._compilation import CacheScope, Compilation, Contribution, Slot
from mainspring.errors import ConfigError, ContextError, ProcessorCycleError

__all__ = [
    "PHASES",
    "SLOTS",
    "CacheScope",
    "Contribution",
    "FirstUserProcessor",
    "LastUserProcessor",
    "Module",
    "Phase",
    "Processor",
    "Slot",
    "SystemProcessor",
    "VirtualTailProcessor",
    "order_processors",
]

Phase: TypeAlias = Literal[
    "sanitize",
    "history",
    "system",
    "stable-context",
    "user-augmentation",
    "virtual-tail",
    "transform",
    "content",
    "finalize",
]
PHASES: tuple[Phase, ...] = get_args(Phase)
"""The phases, in the order a compile runs them."""

SLOTS: tuple[Slot, ...] = get_args(Slot)

_MESSAGE_PHASES = frozenset({"sanitize", "history"})


_MAPPERS: dict[type, bool] = {}
"""Processor classes by whether they override a message mapping."""


class Processor:
    """One step of the context pipeline.

    Subclass and override :meth:`process` (runs at each compile, or once per
    generation for ``scope="session"``) and, for the sanitize and history
    phases, :meth:`map_message` (runs once per committed message) and
    :meth:`reset` (forget per-message state when the history is rebuilt).

    Class attributes give the defaults; the constructor overrides them per
    instance.
    """

    phase: Phase = "transform"
    scope: CacheScope = "turn"
    source: str = "system"
    """The source type its contributions carry unless it names another."""
    slot: Slot | None = None
    """The slot :meth:`Compilation.contribute` uses when none is named."""
    waits: bool = True
    """Whether :meth:`process` may wait (on a model, a store, the network).

    A compile whose processors never wait needs no cancel scope for
    :meth:`~mainspring.context.compiler.ContextCompiler.destroy` to abort it;
    set it to ``False`` only on a processor that never suspends."""

    def __init__(
        self,
        id: str | None = None,
        *,
        phase: Phase | None = None,
        scope: CacheScope | None = None,
        source: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
    ) -> None:
        """Name the processor (default: its class name) and adjust its defaults."""
        self.id = id or type(self).__name__
        if phase is not None:
            self.phase = phase
        if scope is not None:
            self.scope = scope
        if source is not None:
            self.source = source
        self.before = tuple(before)
        self.after = tuple(after)
        self.module = ""
        """Set by the compiler to the owning module's name."""
        if self.phase not in PHASES:
            raise ConfigError(f"processor {self.id!r}: unknown phase {self.phase!r}")
        if self.scope not in ("session", "turn"):
            raise ConfigError(f"processor {self.id!r}: scope must be 'session' or 'turn'")

    @property
    def maps_messages(self) -> bool:
        """Whether this processor rewrites committed messages one by one."""
        if self.phase not in _MESSAGE_PHASES:
            return False
        kind = type(self)
        maps = _MAPPERS.get(kind)
        if maps is None:  # (by class: a compiler asks at every session's start)
            if len(_MAPPERS) >= 4096:  # classes are few; bound it anyway
                _MAPPERS.clear()
            maps = _MAPPERS[kind] = (
                kind.map_message is not Processor.map_message
                or kind.map_messages is not Processor.map_messages
            )
        return maps

    async def process(self, ctx: Compilation[Any]) -> None:
        """Contribute to slots or transform this compile; the default does nothing."""

    def map_message(self, message: Any, index: int) -> Any:
        """The message as the model should see it (sanitize / history phases)."""
        return message

    def map_messages(self, messages: Sequence[Any], start: int) -> Mapping[int, Any]:
        """Map a run of committed messages; ``messages[i]`` is transcript index ``start + i``.

        Returns the messages it changed, by position in ``messages`` (the
        others stay as they are). The default calls :meth:`map_message` on
        each in order; override it to see a long history in one pass. The
        view receives the run after every mapper has seen all of it.
        """
        changed: dict[int, Any] = {}
        map_one = self.map_message
        for offset, message in enumerate(messages):
            mapped = map_one(message, start + offset)
            if mapped is not message:
                changed[offset] = mapped
        return changed

    def reset(self) -> None:
        """Forget per-message state: the history view is being rebuilt."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id!r} {self.phase}/{self.scope}>"


class _SlotProcessor(Processor):
    """A processor whose :meth:`text` becomes one contribution to its slot."""

    async def process(self, ctx: Compilation[Any]) -> None:
        """Contribute :meth:`text`, unless it is empty."""
        text = await self.text(ctx)
        if text:
            assert self.slot is not None
            ctx.contribute(text, slot=self.slot)

    async def text(self, ctx: Compilation[Any]) -> str:
        """The text to contribute; ``""`` skips the contribution.

        Raises:
            NotImplementedError: The subclass does not define ``text`` (the
                message names the subclass and the method to write).
        """
        cls = type(self).__name__
        raise NotImplementedError(
            f"{cls} must define `async def text(self, ctx) -> str`: the text it "
            f"contributes to the {self.slot or 'prompt'} ('' contributes nothing)"
        )


class SystemProcessor(_SlotProcessor):
    """Contributes a system-prompt block (session-scoped by default: cached)."""

    phase: Phase = "system"
    scope: CacheScope = "session"
    slot: Slot | None = "system"


class FirstUserProcessor(_SlotProcessor):
    """Adds text to the first user message (stable: session-scoped by default)."""

    phase: Phase = "stable-context"
    scope: CacheScope = "session"
    slot: Slot | None = "first-user"


class LastUserProcessor(_SlotProcessor):
    """Adds text to the latest user message, after the cache breakpoint."""

    phase: Phase = "user-augmentation"
    scope: CacheScope = "turn"
    slot: Slot | None = "last-user"


class VirtualTailProcessor(_SlotProcessor):
    """Adds a synthetic user message at the end of the request (never committed)."""

    phase: Phase = "virtual-tail"
    scope: CacheScope = "turn"
    slot: Slot | None = "virtual-tail"
    source: str = "reminder"


class Module:
    """A named group of processors with services, config and a teardown.

    Override :meth:`processors`, and :meth:`setup` / :meth:`teardown` when the
    module holds resources. ``services`` are what the compiler was given
    (e.g. a memory store); ``config`` is this module's initial config.
    """

    name: str = "module"

    def __init__(self, name: str | None = None, processors: Iterable[Processor] = ()) -> None:
        """A module named ``name`` holding ``processors`` (or override :meth:`processors`)."""
        if name is not None:
            self.name = name
        self._processors = tuple(processors)

    def processors(self) -> Sequence[Processor]:
        """The processors this module adds."""
        return self._processors

    async def setup(self, services: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        """Called once before the first compile."""

    async def teardown(self) -> None:
        """Called once when the compiler is destroyed, in reverse module order."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


_ORDERS: dict[tuple[object, ...], tuple[int, ...]] = {}
"""Run orders already worked out, by the processors' ids, phases and constraints."""
_ORDERS_MAX = 256


def order_processors(processors: Sequence[Processor]) -> list[Processor]:
    """Processors in run order: by phase, then ``before``/``after``, then as given.

    Raises ProcessorCycleError when the constraints inside a phase form a
    cycle, ContextError for duplicate ids or a constraint that contradicts
    the phase order. Constraints naming absent processors are ignored.

    Every session of an agent orders the same processors: the order is
    remembered by what it depends on (ids, phases, constraints), so a new
    session pays a dictionary lookup.
    """
    key = tuple((p.id, p.phase, p.before, p.after) for p in processors)
    known = _ORDERS.get(key)
    if known is not None:
        return [processors[i] for i in known]
    ordered = _order(processors)
    index = {id(p): i for i, p in enumerate(processors)}
    if len(_ORDERS) >= _ORDERS_MAX:
        _ORDERS.pop(next(iter(_ORDERS)))
    _ORDERS[key] = tuple(index[id(p)] for p in ordered)
    return ordered


def _order(processors: Sequence[Processor]) -> list[Processor]:
    by_id: dict[str, Processor] = {}
    for proc in processors:
        if proc.id in by_id:
            raise ContextError(f"two processors are named {proc.id!r}")
        by_id[proc.id] = proc
    rank = {phase: i for i, phase in enumerate(PHASES)}
    edges: dict[str, set[str]] = {p.id: set() for p in processors}  # a → must run before b
    for proc in processors:
        pairs = [(proc.id, other) for other in proc.before]
        pairs += [(other, proc.id) for other in proc.after]
        for first, second in pairs:
            if first not in by_id or second not in by_id or first == second:
                if first == second:
                    raise ProcessorCycleError(
                        f"processor {first!r} is ordered against itself", cycle=(first,)
                    )
                continue
            a, b = by_id[first], by_id[second]
            if rank[a.phase] > rank[b.phase]:
                raise ContextError(
                    f"{first!r} ({a.phase}) cannot run before {second!r} ({b.phase}): "
                    "phases run in a fixed order"
                )
            if a.phase == b.phase:
                edges[first].add(second)
    ordered: list[Processor] = []
    for phase in PHASES:
        members = [p for p in processors if p.phase == phase]
        ordered.extend(_toposort(members, edges))
    return ordered


def _toposort(members: list[Processor], edges: dict[str, set[str]]) -> list[Processor]:
    """Kahn's algorithm, always taking the earliest registered ready processor."""
    ids = [p.id for p in members]
    position = {pid: i for i, pid in enumerate(ids)}
    indegree = dict.fromkeys(ids, 0)
    for pid in ids:
        for nxt in edges[pid]:
            indegree[nxt] += 1
    ready = sorted((pid for pid in ids if indegree[pid] == 0), key=position.__getitem__)
    out: list[str] = []
    while ready:
        pid = ready.pop(0)
        out.append(pid)
        for nxt in sorted(edges[pid], key=position.__getitem__):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
                ready.sort(key=position.__getitem__)
    if len(out) < len(ids):
        cycle = _find_cycle([pid for pid in ids if pid not in out], edges)
        raise ProcessorCycleError(
            "processor ordering has a cycle: " + " → ".join(cycle), cycle=tuple(cycle)
        )
    by_id = {p.id: p for p in members}
    return [by_id[pid] for pid in out]


def _find_cycle(left: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle among ``left``: each of them still has a predecessor among them."""
    remaining = set(left)
    preds = {n: sorted(m for m in remaining if n in edges[m]) for n in remaining}
    node = left[0]
    seen: list[str] = []
    while node not in seen:
        seen.append(node)
        node = preds[node][0]
    cycle = seen[seen.index(node) :]
    cycle.reverse()
    return [*cycle, cycle[0]]
