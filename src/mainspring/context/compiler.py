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
``_compilation`` (both re-exported here), the request's assembly in
``_assemble``, its counting in ``_tally``, and the turns' records (with
accounting on) in ``_turn_log``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import anyio

from mainspring.context._assemble import assemble
from mainspring.context._compilation import Compilation
from mainspring.context._compiled import CompiledContext, CompiledMessages
from mainspring.context._shape import CORE_MODULE, CompilerShape, Deferral, run_order
from mainspring.context._tally import Accountant
from mainspring.context._turn_log import CompiledTurn, TurnLog, empty_summary
from mainspring.context.accounting import Accounting, Meter
from mainspring.context.pipeline import Contribution, Module, Processor
from mainspring.context.sinks import SinkSet
from mainspring.context.snapshot import CallSnapshot, CostEstimate, SessionSummary, TurnSnapshot
from mainspring.context.transcript import MessageAdapter, PrefixChange, Transcript
from mainspring.context.view import ModelView
from mainspring.errors import CompilerDestroyedError, ContextError
from mainspring.models.base import ToolSpec
from mainspring.usage import Usage

__all__ = ["Compilation", "CompiledContext", "CompiledMessages", "ContextCompiler"]

log = logging.getLogger("mainspring.context")

_NO_CONTRIBUTIONS: dict[str, list[Contribution]] = {}
"""The session cache of compilers that kept nothing yet (empty: only read, popped, cleared)."""

T = TypeVar("T")


def _noticed_by_compiler(change: PrefixChange) -> None:
    """The transcript's hook: nothing (its compiler sees the new generation itself).

    One function for every transcript: a callback into the compiler would be a
    reference cycle (or a weak reference and a partial per session) for a
    change that most sessions never make.
    """


class ContextCompiler(Generic[T]):
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
    _turn: CompiledTurn | None = None
    """The turn being compiled (made at its first compile, dropped at its end)."""
    _log: TurnLog[T] | None = None
    """The turns' records: with accounting on (or telemetry adopted), else none."""

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
        """Build the compiler; ``processors`` belong to an implicit module ``"core"``.

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
        self._start(shape, (Module(CORE_MODULE, processors), *modules), messages, session_id)

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
        ``processors``): one plain :class:`Module` ``"core"`` holding them,
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
        """Where the processors that map messages are in :attr:`processors` (indexes)."""
        self._user_on_prefix_change = shape.on_prefix_change
        self.transcript: Transcript[T] = Transcript(
            shape.adapter,
            strict=shape.strict,
            trust_message_identity=shape.trust_message_identity,
            # (no callback into the compiler: the two would be a reference cycle, which
            # only the cyclic garbage collector frees, with the session's every message)
            on_prefix_change=_noticed_by_compiler,
        )
        self.retain_turns = shape.retain_turns
        """The most turn snapshots :attr:`summary` keeps (``None``: all)."""
        self.meter: Meter | None
        self._sizer: Meter
        """Counts the view even without accounting (compaction needs sizes)."""
        self._accountant: Accountant[T] | None
        """Counts requests, with accounting on (none kept without: nothing reads it)."""
        if accounting is None:  # the shape's sizing and view parts, shared
            self.meter = self._accountant = None
            self._sizer = shape.sizer
            self._view: ModelView[T] = ModelView(*shape.view_parts)
        else:  # a meter of its own
            meter = self.meter = self._sizer = Meter(accounting, shape.model)
            sinks = SinkSet(accounting.sinks, strict=accounting.strict)
            self._log = TurnLog(meter, session_id, shape.retain_turns, sinks)
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
            modules = self._modules = (Module(CORE_MODULE, self._processors),)
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

        Raises CompilerDestroyedError if the compiler is (or gets) destroyed.
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
        turn = self._turn
        if turn is None or turn.turn_index != turn_index:
            self._flush_turn()
            turn = self._turn = CompiledTurn(turn_index=turn_index, started_at=time.time())
        ctx: Compilation[T] = Compilation(self, turn_index, step, turn.cache)
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
        compiled = assemble(
            ctx, self._view, self.adapter, tools, self._accountant, self.transcript.generation
        )
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

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by this compiler's tokenizer (an estimate without accounting)."""
        return self._sizer.count(text)

    # -- turn records (kept by the TurnLog, with accounting on) -----------------

    def record_call(
        self,
        compiled: CompiledContext[T],
        *,
        model: str,
        usage: Usage,
        cost: CostEstimate,
    ) -> CallSnapshot | None:
        """Attach the provider's usage and cost to a compiled request (accounting on)."""
        log, turn = self._log, self._turn
        if log is None or turn is None:
            return None
        return log.record_call(turn, compiled, model=model, usage=usage, cost=cost)

    def end_turn(self) -> TurnSnapshot | None:
        """Close the current turn: take its snapshot and hand it to the sinks."""
        self._alive()
        return self._flush_turn()

    def _flush_turn(self) -> TurnSnapshot | None:
        turn, self._turn = self._turn, None
        if turn is None or self._log is None:
            return None
        return self._log.close(turn)

    @property
    def summary(self) -> list[TurnSnapshot]:
        """The turn snapshots taken (with accounting on), the newest ``retain_turns``."""
        return [] if self._log is None else self._log.summary

    def session_summary(self) -> SessionSummary:
        """Totals over every turn snapshot taken so far (also those no longer kept)."""
        if self._log is None:
            return empty_summary(self.session_id)
        return self._log.session_summary()

    def adopt_telemetry(self, previous: ContextCompiler[Any]) -> None:
        """Carry another compiler's kept snapshots and totals over (one session, new compiler)."""
        log = self._log
        if log is None:
            if previous._log is None:  # neither recorded a turn
                return
            log = self._log = TurnLog(None, self.session_id, self.retain_turns, None)
        log.adopt(previous._log)

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
        one fails. With ``final=False`` (the session goes on in a new compiler,
        see :meth:`adopt_telemetry`) no summary is sent and the sinks stay
        open. Later calls raise CompilerDestroyedError; a second destroy does
        nothing.
        """
        if self._destroyed:
            return
        if self._active is not None:
            self._active.cancel()
        sinks = None if self._log is None else self._log.sinks
        try:
            self._flush_turn()
            if final and sinks is not None:
                sinks.emit_summary(self.session_summary())
        finally:
            self._destroyed = True
            try:
                if final and sinks is not None:
                    sinks.close()
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
