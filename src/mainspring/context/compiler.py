"""The context compiler: one session's transcript compiled into model requests.

```
append / sync ─► Transcript ─► sanitize + history map_message ─► ModelView
                                                                  │
compile(turn, step) ─► processors, phase by phase ─► contributions
                          (session scope: replayed)      │
                                                          ▼
    system blocks (session ones, then ◆ breakpoint, then turn ones)
    messages = view + first-user / last-user text + virtual tail
    segments (source / module / processor, chars, tokens) ─► TurnSnapshot ─► sinks
```

A compile costs O(delta + contributions): the view is kept incrementally,
the compiled message list is an overlay on it, and token sums are running
totals. Session-scoped contributions sit before the prompt-cache breakpoint
and never move it; turn-scoped ones sit after it (the latest user message,
the virtual tail, system blocks after the breakpoint).

The compiled request's types are in ``_compiled``, what a processor sees in
``_compilation`` (both re-exported here), and the request's counting in
``_tally``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

import anyio

from mainspring._lowlevel.frozen import maker
from mainspring.context._compilation import Compilation
from mainspring.context._compiled import CompiledContext, CompiledMessages, deferring
from mainspring.context._shape import CompilerShape, Deferral, run_order
from mainspring.context._tally import Accountant
from mainspring.context._turn_records import TurnRecords, new_turn
from mainspring.context.accounting import Accounting, Meter
from mainspring.context.pipeline import Contribution, Module, Processor
from mainspring.context.sinks import SinkSet
from mainspring.context.snapshot import (
    Segment,
    TurnSnapshot,
)
from mainspring.context.transcript import MessageAdapter, PrefixChange, Transcript
from mainspring.context.view import ModelView
from mainspring.errors import CompilerDestroyedError, ContextError
from mainspring.models.base import SystemBlock, ToolSpec

__all__ = ["Compilation", "CompiledContext", "CompiledMessages", "ContextCompiler"]

log = logging.getLogger("mainspring.context")

_NO_SLOTS: Mapping[str, list[Contribution]] = MappingProxyType(
    {"system": [], "first-user": [], "last-user": [], "virtual-tail": []}
)
"""The contributions by slot of a compile that has none."""

_NO_CONTRIBUTIONS: dict[str, list[Contribution]] = {}
"""The session cache of compilers that kept nothing yet (empty: only read, popped, cleared)."""

T = TypeVar("T")


# Built every compile: made without calling the class (see mainspring._lowlevel.frozen.maker).
_new_compiled = maker(CompiledContext)


def _noticed_by_compiler(change: PrefixChange) -> None:
    """The transcript's hook: nothing (its compiler sees the new generation itself).

    One function for every transcript: a callback into the compiler would be a
    reference cycle (or a weak reference and a partial per session) for a
    change that most sessions never make.
    """


class ContextCompiler(TurnRecords[T]):
    """One session's context pipeline: transcript, processors, view, accounting."""

    # How every compiler starts (read from the class until first changed: an agent
    # builds one per session, and most sessions never change some of these).
    _set_up = False
    _destroyed = False
    _active: anyio.CancelScope | None = None
    _stale_view = False
    _generation = 0
    """The transcript generation last seen: a newer one is a prefix change to take in
    (see :meth:`_notice`)."""
    _behind: int | None = None
    """The transcript index from which the view is behind (appends
    map into the view when it is next read, so those between two compiles map as one
    run, and the last answer of a conversation only if it is compiled again)."""
    _session_cache: dict[str, list[Contribution]] = _NO_CONTRIBUTIONS
    """Session-scoped contributions by processor id: the shared empty dict, never
    written, until the first is kept (a dict of its own then)."""
    _deferred: Deferral | None = None
    """Processors not made yet (see :class:`~mainspring.context._shape.Deferral`)."""

    def __init__(
        self,
        *,
        adapter: MessageAdapter[T] | None = None,
        messages: Iterable[T] = (),
        processors: Iterable[Processor] = (),
        modules: Iterable[Module] = (),
        services: Mapping[str, Any] | None = None,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        strict: bool = True,
        trust_message_identity: bool = False,
        on_prefix_change: Callable[[PrefixChange], None] | None = None,
        accounting: Accounting | None = None,
        session_id: str = "",
        model: str = "",
        retain_turns: int | None = None,
    ) -> None:
        """Build the engine; ``processors`` belong to an implicit module ``"engine"``.

        ``retain_turns`` bounds :attr:`summary` to the newest turn snapshots
        (the session's totals still count every turn).

        Raises ProcessorCycleError / ContextError for a bad processor order, and
        ConfigError for a ``retain_turns`` below 1.
        """
        shape: CompilerShape[T] = CompilerShape(
            adapter=adapter,
            services=services,
            config=config,
            strict=strict,
            trust_message_identity=trust_message_identity,
            on_prefix_change=on_prefix_change,
            accounting=accounting,
            model=model,
            retain_turns=retain_turns,
        )
        self._start(shape, (Module("engine", processors), *modules), messages, session_id)

    @classmethod
    def shaped(
        cls,
        shape: CompilerShape[T],
        modules: tuple[Module, ...] | None,
        messages: Iterable[T] = (),
        *,
        session_id: str = "",
        processors: tuple[Processor, ...] | None = None,
        deferred: Deferral | None = None,
    ) -> ContextCompiler[T]:
        """A compiler of ``shape`` (shared with others) running ``modules`` (its own).

        ``processors``, when given, are the modules' processors already in run
        order with their module names set (a caller that builds many compilers
        of the same modules works the order out once); otherwise they are
        ordered here, as the constructor does. ``modules=None`` (with
        ``processors``): one plain :class:`Module` ``"engine"`` holding them,
        made only if :attr:`modules` is read (its setup and teardown do nothing).
        ``deferred``: processors made only when first needed (then they replace
        ``processors`` and ``modules``; see :class:`~mainspring.context._shape.Deferral`).
        """
        compiler = cls.__new__(cls)
        if deferred is not None:
            compiler._deferred = deferred
        compiler._start(shape, modules, messages, session_id, processors)
        return compiler

    def _start(
        self,
        shape: CompilerShape[T],
        modules: tuple[Module, ...] | None,
        messages: Iterable[T],
        session_id: str,
        processors: tuple[Processor, ...] | None = None,
    ) -> None:
        self.adapter: MessageAdapter[T] = shape.adapter
        self._modules = modules
        self.services: Mapping[str, Any] = shape.services
        self.config: Mapping[str, Mapping[str, Any]] = shape.config
        self.session_id = session_id
        accounting = self.accounting = shape.accounting
        if processors is None:
            assert modules is not None, "modules, processors or both"
            processors = run_order(modules)
        self._processors: tuple[Processor, ...] = processors
        self._mappers = tuple(i for i, p in enumerate(processors) if p.maps_messages)
        """Where the processors that map messages are in :attr:`processors` (indexes: a
        tuple of ints is not walked by the cyclic collector, one of processors is)."""
        self._user_on_prefix_change = shape.on_prefix_change
        self.transcript: Transcript[T] = Transcript(
            shape.adapter,
            strict=shape.strict,
            trust_message_identity=shape.trust_message_identity,
            # (no callback into the compiler: that would make the two a cycle, which only
            # the garbage collector frees -- a session's every message with them)
            on_prefix_change=_noticed_by_compiler,
        )
        self.retain_turns = shape.retain_turns
        """The most turn snapshots :attr:`summary` keeps (``None``: all)."""
        self.meter: Meter | None
        self._sizer: Meter
        """Counts the view even without accounting (compaction needs sizes)."""
        self._sinks: SinkSet | None
        self._accountant: Accountant[T] | None
        """Counts requests, with accounting on (none kept without: nothing reads it)."""
        if accounting is None:  # the shape's sizing and view parts, shared
            self.meter = self._accountant = self._sinks = None
            self._sizer = shape.sizer
            self._view: ModelView[T] = ModelView(*shape.view_parts)
        else:  # a meter of its own
            meter = self.meter = self._sizer = Meter(accounting, shape.model)
            self._sinks = SinkSet(accounting.sinks, strict=accounting.strict)
            parts = shape.view_parts_for(meter)
            self._view = ModelView(*parts)
            self._accountant = Accountant(meter, self._view, self.transcript, parts[0])
        if type(messages) not in (tuple, list) or messages:  # (a new session has none)
            self.append(messages)

    @property
    def processors(self) -> tuple[Processor, ...]:
        """The processors this compiler runs, in run order."""
        if self._deferred is not None:
            self._make_deferred()
        return self._processors

    @property
    def modules(self) -> tuple[Module, ...]:
        """The modules whose processors this compiler runs."""
        if self._deferred is not None:
            self._make_deferred()
        modules = self._modules
        if modules is None:  # (see shaped: one plain module, made when first asked for)
            modules = self._modules = (Module("engine", self._processors),)
        return modules

    def _make_deferred(self) -> None:
        """Make the processors deferred so far, and hand their mappers what the view holds."""
        deferred = self._deferred
        assert deferred is not None
        processors, self._modules = deferred.make()
        del self._deferred  # (back to the class's None)
        self._processors = processors
        mappers = self._mappers = tuple(i for i, p in enumerate(processors) if p.maps_messages)
        mapped = len(self.transcript) if self._behind is None else self._behind
        if not mappers or not mapped or self._stale_view:  # (a rebuild maps everything)
            return
        run = self.transcript.backing[:mapped]
        for at in mappers:
            proc = processors[at]
            if proc.map_messages(run, 0):
                raise ContextError(f"deferred processor {proc.id!r} mapped a message")

    # -- transcript ---------------------------------------------------------

    @property
    def view(self) -> ModelView[T]:
        """What the model is shown of the transcript, up to date when read."""
        if self.transcript._generation != self._generation:
            self._notice()
        if self._behind is not None:
            self._catch_up()
        return self._view

    def append(self, delta: Iterable[T]) -> None:
        """Commit messages; they are mapped into the view by its next read: O(delta).

        A processor that maps messages wrongly fails the read that maps them
        (a compile, or reading :attr:`view`), as a failing compile does.
        """
        self._alive()
        start = len(self.transcript)
        self.transcript.append(delta)
        if self._behind is None:
            self._behind = start

    def _catch_up(self) -> None:
        """Map what was appended since the view was last read."""
        start, self._behind = self._behind, None
        if start is not None:
            self._extend_view(start)

    def sync(self, full: Sequence[T]) -> int:
        """Bring the transcript to ``full`` (see :meth:`Transcript.sync`)."""
        self._alive()
        self._catch_up()
        start = len(self.transcript)
        committed = self.transcript.sync(full)
        self._notice()
        if self._stale_view:
            self._rebuild_view()
        else:
            self._extend_view(start)
        return committed

    def invalidate_prefix(self, reason: str, processor_id: str | None = None) -> PrefixChange:
        """A change outside the transcript: recompute everything session-scoped.

        Raises PrefixMutationError in strict mode; nothing changes then.
        """
        self._alive()
        change = self.transcript.invalidate_prefix(reason, processor_id)
        self._notice()
        self._rebuild_view()
        return change

    def invalidate(self, processor_id: str) -> None:
        """Recompute one session-scoped processor at the next compile."""
        self._alive()
        self._session_cache.pop(processor_id, None)

    def _notice(self) -> None:
        """Take in a prefix change of the transcript made since the compiler last looked.

        The compiler's own :meth:`sync` and :meth:`invalidate_prefix` take theirs in
        at once; a change made on :attr:`transcript` directly is taken in at the
        next read of :attr:`view` or compile (the latest one, if there were several).
        """
        transcript = self.transcript
        if transcript._generation == self._generation:
            return
        self._generation = transcript._generation
        change = transcript.last_change
        assert change is not None, "a new generation comes with its change"
        self._prefix_changed(change)

    def _prefix_changed(self, change: PrefixChange) -> None:
        # The prefix-dependent caches first (one callback: no cache registered per session).
        self._session_cache.clear()
        self._stale_view = True
        if self._user_on_prefix_change is not None:
            self._user_on_prefix_change(change)
        else:
            log.warning("transcript prefix changed: %s", change.reason)

    def _extend_view(self, start: int) -> None:
        if self._stale_view:
            self._rebuild_view()
            return
        self._add_to_view(start)

    def _rebuild_view(self) -> None:
        self._stale_view = False
        self._behind = None
        for proc in self._processors:
            proc.reset()
        self._view.clear()
        self._add_to_view(0)

    def _add_to_view(self, start: int) -> None:
        """Map the transcript's messages from ``start`` on and add them to the view."""
        backing = self.transcript.backing
        batch = backing[start:]
        if not batch:
            return
        owners: dict[int, tuple[str, str]] = {}
        try:
            processors = self._processors
            for at in self._mappers:  # each mapper sees the run as the previous one left it
                proc = processors[at]
                for offset, message in proc.map_messages(batch, start).items():
                    if not 0 <= offset < len(batch):
                        raise ContextError(
                            f"processor {proc.id!r} mapped message {offset}, "
                            f"outside the run of {len(batch)}"
                        )
                    batch[offset] = message
                    owners[offset] = (proc.module, proc.id)
        except BaseException:
            self._stale_view = True  # mappers saw part of the run: rebuild at the next use
            self._view.unshare(start)
            raise
        # Entries no processor rewrote: the view holds the transcript's own list, not a copy.
        if owners or not self._view.extend_shared(backing, start, batch):
            self._view.unshare(start)
            self._view.extend(batch, owners)

    # -- compiling -----------------------------------------------------------

    async def compile(
        self, *, turn_index: int, step: int = 1, tools: tuple[ToolSpec, ...] = ()
    ) -> CompiledContext[T]:
        """Run the processors and assemble one request.

        Raises CompilerDestroyedError if the engine is (or gets) destroyed.
        """
        self._alive()
        await self._setup()
        if self.transcript._generation != self._generation:
            self._notice()
        if self._behind is not None:
            self._catch_up()
        if self._stale_view:
            self._rebuild_view()
        deferred = self._deferred
        if deferred is not None and not self._view.tokens_within(deferred.within):
            self._make_deferred()  # (until here they would have done nothing)
        if self._turn is None or self._turn.turn_index != turn_index:
            self._flush_turn()
            self._turn = new_turn(turn_index=turn_index, started_at=time.time())
            self._turn_cache = {}
        ctx: Compilation[T] = Compilation(self, turn_index, step, self._turn_cache)
        processors = self._processors
        if any(proc.waits for proc in processors):
            with anyio.CancelScope() as scope:  # what destroy() aborts
                self._active = scope
                try:
                    for proc in processors:
                        await self._run(proc, ctx)
                finally:
                    self._active = None
            if scope.cancelled_caught:
                raise CompilerDestroyedError("the context compiler was destroyed during a compile")
        else:  # none of them suspends: nothing can abort the compile halfway
            for proc in processors:
                await self._run(proc, ctx)
        if self._destroyed:
            raise CompilerDestroyedError("the context compiler was destroyed during a compile")
        compiled = self._assemble(ctx, tools)
        if self._turn is not None:
            self._turn.pending = compiled
        return compiled

    async def _run(self, proc: Processor, ctx: Compilation[T]) -> None:
        if proc.scope == "session":
            cached = self._session_cache.get(proc.id)
            if cached is not None:
                ctx.contributions.extend(cached)
                return
            mark = len(ctx.contributions)
            ctx._current = proc
            try:
                await proc.process(ctx)
            finally:
                ctx._current = None
            cache = self._session_cache
            if cache is _NO_CONTRIBUTIONS:  # the first kept: a dict of its own
                cache = self._session_cache = {}
            cache[proc.id] = ctx.contributions[mark:]
            return
        ctx._current = proc
        try:
            await proc.process(ctx)
        finally:
            ctx._current = None

    def _assemble(self, ctx: Compilation[T], tools: tuple[ToolSpec, ...]) -> CompiledContext[T]:
        view = self._view
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
            adapter = self.adapter
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
        accountant = self._accountant
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
        compiled: CompiledContext[T] = _new_compiled(
            system=system,
            messages=messages,
            contributions=contributions,
            turn_index=ctx.turn_index,
            step=ctx.step,
            generation=self.transcript.generation,
            stable_blocks=stable,
            segments=segments,
        )
        return compiled if self.meter is None else deferring(compiled)

    def end_turn(self) -> TurnSnapshot | None:
        """Close the current turn: take its snapshot and hand it to the sinks."""
        self._alive()
        return self._flush_turn()

    # -- lifecycle -------------------------------------------------------------

    async def _setup(self) -> None:
        if self._set_up:
            return
        self._set_up = True
        for module in self._modules or ():  # (none: one plain module, nothing to set up)
            await module.setup(self.services, self.config.get(module.name, {}))

    @property
    def destroyed(self) -> bool:
        """Whether :meth:`destroy` ran."""
        return self._destroyed

    async def destroy(self, *, final: bool = True) -> None:
        """Abort a running compile, flush the summary, tear modules down, clear state.

        The current turn's snapshot goes to the sinks, then (``final``) the
        :class:`~mainspring.context.snapshot.SessionSummary` and the sinks are
        closed; modules are torn down in reverse order, every one even when
        one fails. With ``final=False`` (the session goes on in a new engine,
        see :meth:`adopt_telemetry`) no summary is sent and the sinks stay
        open. Later calls raise CompilerDestroyedError; a second destroy does
        nothing.
        """
        if self._destroyed:
            return
        if self._active is not None:
            self._active.cancel()
        try:
            self._flush_turn()
            if final and self._sinks is not None:
                self._sinks.emit_summary(self.session_summary())
        finally:
            self._destroyed = True
            try:
                if final and self._sinks is not None:
                    self._sinks.close()
            finally:
                await self._teardown()

    async def _teardown(self) -> None:
        errors: list[BaseException] = []
        if self._set_up:
            for module in reversed(self._modules or ()):
                try:
                    await module.teardown()
                except Exception as exc:  # every module gets its teardown
                    log.exception("module %r failed to tear down", module.name)
                    errors.append(exc)
        self._session_cache.clear()
        self._behind = None
        self._view.clear()
        if errors:
            raise ContextError("a module failed to tear down") from errors[0]

    def _alive(self) -> None:
        if self._destroyed:
            raise CompilerDestroyedError("this context compiler was destroyed")
