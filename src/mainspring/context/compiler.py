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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast, overload

import anyio

from mainspring.context._sizes import mainspring_scan
from mainspring.context.accounting import Accounting, Meter, Piece, SegmentLookup
from mainspring.context.pipeline import (
    Contribution,
    Module,
    Processor,
    Slot,
    order_processors,
)
from mainspring.context.sinks import SinkSet
from mainspring.context.snapshot import (
    CallSnapshot,
    CostEstimate,
    Segment,
    SegmentRow,
    Segments,
    SessionSummary,
    SessionTotals,
    TurnSnapshot,
)
from mainspring.context.transcript import (
    MainspringAdapter,
    MessageAdapter,
    PrefixChange,
    Transcript,
)
from mainspring.context.view import ModelView
from mainspring.errors import (
    CompilerDestroyedError,
    ConfigError,
    ContextError,
    ProcessorScopeError,
)
from mainspring.models.base import SystemBlock, ToolSpec
from mainspring.tokens import EstimateTokenizer
from mainspring.usage import Usage

__all__ = ["Compilation", "CompiledContext", "CompiledMessages", "ContextCompiler"]

log = logging.getLogger("mainspring.context")

_ESTIMATE = EstimateTokenizer("chars", chars_per_token=4.0)
_SIZERS: dict[str, Meter] = {}
"""The estimate meter of each model, shared by the compilers that run without
accounting: it holds no session's state (its pieces are immutable and keyed
by their content), and one per session costs every live session its cache."""


def _estimate_sizer(model: str) -> Meter:
    sizer = _SIZERS.get(model)
    if sizer is None:
        if len(_SIZERS) >= 64:  # model names come from configuration: a few, but bound them
            _SIZERS.clear()
        sizer = _SIZERS[model] = Meter(Accounting(tokenizer=_ESTIMATE), model)
    return sizer


_NO_USAGE = Usage()
_NO_COST = CostEstimate(usd=0.0, priced=False, price_source="none")

T = TypeVar("T")


class CompiledMessages(Sequence[T]):
    """The request's messages: the view, with a few entries overridden and a tail.

    Built in O(overrides); reads are O(1) per index. It never changes: later
    view appends do not show through (the length is fixed at compile time),
    and before the view edits an entry (compaction, microcompact) it hands
    every request still alive a copy of what it held (copy-on-write), so a
    request handed to a model stays what was sent.
    """

    __slots__ = ("__weakref__", "_base", "_n", "_overrides", "_tail")

    def __init__(self, base: Sequence[T], n: int, overrides: Mapping[int, T], tail: Sequence[T]):
        self._base = base
        self._n = n
        self._overrides = dict(overrides)
        self._tail = tuple(tail)

    def __len__(self) -> int:
        return self._n + len(self._tail)

    def _detach(self) -> None:
        """Copy the entries this request reads from the view (it is about to change)."""
        if not isinstance(self._base, list):
            self._base = list(self._base[: self._n])

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        if index >= self._n:
            return self._tail[index - self._n]
        found = self._overrides.get(index)
        return self._base[index] if found is None else found

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # list-like, unhashable

    def __repr__(self) -> str:
        return f"CompiledMessages({list(self)!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledContext(Generic[T]):
    """One compiled request: system blocks, messages and their attribution."""

    system: tuple[SystemBlock, ...]
    messages: Sequence[T]
    contributions: tuple[Contribution, ...]
    turn_index: int
    step: int
    generation: int
    stable_blocks: int
    """How many system blocks form the stable (cached) prefix."""
    segments: Sequence[Segment] = ()
    """Per source / module / processor, with accounting on (a :class:`Segments`)."""
    prefix_tokens: int = 0
    stable_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Counted tokens of the request (0 without accounting)."""
        segments = self.segments
        if isinstance(segments, Segments):
            return segments.tokens
        return sum(s.tokens for s in segments)


@dataclass(slots=True)
class _Prev:
    """What the previous compile sent, for prefix reuse."""

    system: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] | None = None
    view_len: int = 0
    last_user: tuple[int, str] | None = None
    """(index, text) the previous call added to the latest user message."""
    first_user: tuple[int, str] | None = None
    generation: int = -1


@dataclass(slots=True)
class _Turn:
    turn_index: int
    started_at: float
    calls: list[CallSnapshot] = field(default_factory=list[CallSnapshot])
    pending: CompiledContext[Any] | None = None


class Compilation(Generic[T]):
    """What a processor sees and may do during one compile."""

    def __init__(
        self, engine: ContextCompiler[T], turn_index: int, step: int, turn_cache: dict[str, Any]
    ) -> None:
        self.engine = engine
        self.turn_index = turn_index
        self.step = step
        self.turn_cache = turn_cache
        """Shared by the compiles of one turn (e.g. memory recalled once per turn)."""
        self.contributions: list[Contribution] = []
        self.overrides: dict[int, T] = {}
        self.override_owners: dict[int, tuple[str, str]] = {}
        self.tail: list[T] = []
        self._current: Processor | None = None

    # -- reading -----------------------------------------------------------

    @property
    def transcript(self) -> Transcript[T]:
        """The committed transcript (read it; never change it)."""
        return self.engine.transcript

    @property
    def messages(self) -> ModelView[T]:
        """The model's history view."""
        return self.engine.view

    @property
    def services(self) -> Mapping[str, Any]:
        """The engine's services (e.g. ``"memory"``)."""
        return self.engine.services

    def config(self, module: str | None = None) -> Mapping[str, Any]:
        """A module's config (default: the running processor's module)."""
        name = module if module is not None else (self._current.module if self._current else "")
        return self.engine.config.get(name, {})

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message ("" when there is none)."""
        index = self.engine.transcript.last_user_index
        if index is None:
            return ""
        message = self.engine.transcript.messages[index]
        return "\n".join(self.engine.adapter.text_segments(message))

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the engine's tokenizer (an estimate without accounting)."""
        return self.engine._sizer.count(text)

    # -- contributing ------------------------------------------------------

    def contribute(self, text: str, *, slot: Slot | None = None, source: str | None = None) -> None:
        """Add ``text`` to ``slot`` (default: the processor's), attributed to it."""
        proc = self._current
        if proc is None:
            raise ContextError("contribute() is only available while a processor runs")
        chosen = slot or proc.slot
        if chosen is None:
            raise ContextError(f"processor {proc.id!r} contributed without naming a slot")
        if chosen not in ("system", "first-user", "last-user", "virtual-tail"):
            raise ContextError(f"processor {proc.id!r}: unknown slot {chosen!r}")
        if not text:
            return
        self.contributions.append(
            Contribution(
                slot=chosen,
                text=text,
                source=source or proc.source,
                module=proc.module,
                processor=proc.id,
                scope=proc.scope,
            )
        )

    def rewrite(self, fn: Callable[[Contribution], str]) -> None:
        """Content phase: replace each turn-scoped contribution's text by ``fn(c)``.

        Session-scoped contributions form the cached prefix and are left as
        they are.
        """
        self._structural("rewrite contributions")
        self.contributions = [
            c if c.scope == "session" else _with_text(c, fn(c)) for c in self.contributions
        ]

    # -- structural changes -------------------------------------------------

    def replace_message(self, index: int, message: T) -> None:
        """Show ``message`` instead of view entry ``index`` in this request only."""
        proc = self._structural("replace a message")
        if not 0 <= index < len(self.engine.view):
            raise IndexError(f"message index {index} out of range")
        self.overrides[index] = message
        self.override_owners[index] = (proc.module, proc.id)

    def edit_history(self) -> _HistoryEditor[T]:
        """Persistent edits of the view (compaction), attributed to this processor."""
        proc = self._structural("edit the history")
        return _HistoryEditor(self.engine.view, proc.module, proc.id)

    def _structural(self, what: str) -> Processor:
        proc = self._current
        if proc is None:
            raise ContextError(f"cannot {what} outside a processor")
        if proc.scope == "session":
            raise ProcessorScopeError(
                f"session-scoped processor {proc.id!r} tried to {what}; "
                "session-scoped processors may only contribute"
            )
        return proc


class _HistoryEditor(Generic[T]):
    """Edits of the model view on behalf of one processor."""

    def __init__(self, view: ModelView[T], module: str, processor: str) -> None:
        self.view = view
        self._module = module
        self._processor = processor

    def replace(self, index: int, message: T) -> None:
        """Rewrite one entry."""
        self.view.replace(index, message, self._module, self._processor)

    def splice(self, start: int, stop: int, messages: Iterable[T]) -> None:
        """Replace entries ``[start, stop)``."""
        self.view.splice(start, stop, messages, self._module, self._processor)


def _with_text(c: Contribution, text: str) -> Contribution:
    return Contribution(
        slot=c.slot,
        text=text,
        source=c.source,
        module=c.module,
        processor=c.processor,
        scope=c.scope,
    )


class ContextCompiler(Generic[T]):
    """One session's context pipeline: transcript, processors, view, accounting."""

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
        if retain_turns is not None and retain_turns < 1:
            raise ConfigError("retain_turns must be at least 1 (or None to keep every turn)")
        self.adapter: MessageAdapter[T] = adapter or cast(MessageAdapter[T], MainspringAdapter())
        self.modules: tuple[Module, ...] = (Module("engine", processors), *modules)
        self.services: Mapping[str, Any] = dict(services or {})
        self.config: dict[str, Mapping[str, Any]] = {k: dict(v) for k, v in (config or {}).items()}
        self.session_id = session_id
        self.accounting = accounting
        self.meter: Meter | None = Meter(accounting, model) if accounting else None
        self._sizer = self.meter or _estimate_sizer(model)
        """Counts the view even without accounting (compaction needs sizes)."""
        self._sinks = SinkSet(accounting.sinks, strict=accounting.strict) if accounting else None
        everything: list[Processor] = []
        for module in self.modules:
            for proc in module.processors():
                proc.module = module.name
                everything.append(proc)
        self.processors: tuple[Processor, ...] = tuple(order_processors(everything))
        self._mappers = tuple(p for p in self.processors if p.maps_messages)
        self._segmenter = (
            cast(SegmentLookup, self.adapter) if _segments_itself(self.adapter) else None
        )
        self.view: ModelView[T] = ModelView(self._measure, self.adapter.role, self._view_scan())
        self._session_cache: dict[str, list[Contribution]] = {}
        self._user_on_prefix_change = on_prefix_change
        self.transcript: Transcript[T] = Transcript(
            self.adapter,
            strict=strict,
            trust_message_identity=trust_message_identity,
            on_prefix_change=self._prefix_changed,
        )
        self._stale_view = False
        self.transcript.register_cache(self._clear_caches)
        self._prev = _Prev()
        self._tools_piece: tuple[tuple[ToolSpec, ...], Piece] | None = None
        self._tally: _Tally | None = None
        self._turn: _Turn | None = None
        self._turn_cache: dict[str, Any] = {}
        self._set_up = False
        self._destroyed = False
        self._active: anyio.CancelScope | None = None
        self.retain_turns = retain_turns
        """The most turn snapshots :attr:`summary` keeps (``None``: all)."""
        self.summary: list[TurnSnapshot] = []
        """The turn snapshots taken (with accounting on), the newest ``retain_turns``."""
        self._totals = SessionTotals()
        self.append(messages)

    # -- transcript ---------------------------------------------------------

    def append(self, delta: Iterable[T]) -> None:
        """Commit messages and map them into the view: O(delta)."""
        self._alive()
        start = len(self.transcript)
        self.transcript.append(delta)
        self._extend_view(start)

    def sync(self, full: Sequence[T]) -> int:
        """Bring the transcript to ``full`` (see :meth:`Transcript.sync`)."""
        self._alive()
        start = len(self.transcript)
        committed = self.transcript.sync(full)
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
        self._rebuild_view()
        return change

    def invalidate(self, processor_id: str) -> None:
        """Recompute one session-scoped processor at the next compile."""
        self._alive()
        self._session_cache.pop(processor_id, None)

    def _prefix_changed(self, change: PrefixChange) -> None:
        if self._user_on_prefix_change is not None:
            self._user_on_prefix_change(change)
        else:
            log.warning("transcript prefix changed: %s", change.reason)

    def _clear_caches(self, change: PrefixChange) -> None:
        self._session_cache.clear()
        self._stale_view = True

    def _extend_view(self, start: int) -> None:
        if self._stale_view:
            self._rebuild_view()
            return
        self._add_to_view(start)

    def _rebuild_view(self) -> None:
        self._stale_view = False
        for proc in self.processors:
            proc.reset()
        self.view.clear()
        self._add_to_view(0)

    def _add_to_view(self, start: int) -> None:
        """Map the transcript's messages from ``start`` on and add them to the view."""
        batch = self.transcript.backing[start:]
        if not batch:
            return
        owners: dict[int, tuple[str, str]] = {}
        try:
            for proc in self._mappers:  # each mapper sees the run as the previous one left it
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
            raise
        self.view.extend(batch, owners)

    def _view_scan(self) -> Callable[[Sequence[T], int], tuple[int, int, list[int]]] | None:
        """The view's scan of a run of entries: a direct one for mainspring messages."""
        kind: type = type(self.adapter)
        if (
            issubclass(kind, MainspringAdapter)
            and kind.segments is _MS_SEGMENTS
            and kind.role is _MS_ROLE
        ):
            return cast(
                Callable[[Sequence[T], int], tuple[int, int, list[int]]],
                mainspring_scan(self._sizer),
            )
        return None

    def _measure(self, message: T, module: str, processor: str) -> tuple[Piece, ...]:
        meter = self._sizer
        if self._segmenter is not None:
            segments = self._segmenter.segments(message)
        else:
            role = self.adapter.role(message)
            segments = [(role, text) for text in self.adapter.text_segments(message)]
        return meter.measure(segments, module, processor)

    # -- compiling -----------------------------------------------------------

    async def compile(
        self, *, turn_index: int, step: int = 1, tools: tuple[ToolSpec, ...] = ()
    ) -> CompiledContext[T]:
        """Run the processors and assemble one request.

        Raises CompilerDestroyedError if the engine is (or gets) destroyed.
        """
        self._alive()
        await self._setup()
        if self._stale_view:
            self._rebuild_view()
        if self._turn is None or self._turn.turn_index != turn_index:
            self._flush_turn()
            self._turn = _Turn(turn_index, time.time())
            self._turn_cache = {}
        ctx: Compilation[T] = Compilation(self, turn_index, step, self._turn_cache)
        with anyio.CancelScope() as scope:
            self._active = scope
            try:
                for proc in self.processors:
                    await self._run(proc, ctx)
            finally:
                self._active = None
        if scope.cancelled_caught or self._destroyed:
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
            self._session_cache[proc.id] = ctx.contributions[mark:]
            return
        ctx._current = proc
        try:
            await proc.process(ctx)
        finally:
            ctx._current = None

    def _assemble(self, ctx: Compilation[T], tools: tuple[ToolSpec, ...]) -> CompiledContext[T]:
        adapter = self.adapter
        view = self.view
        n = len(view)
        by_slot: dict[str, list[Contribution]] = {
            "system": [],
            "first-user": [],
            "last-user": [],
            "virtual-tail": [],
        }
        for c in ctx.contributions:
            by_slot[c.slot].append(c)
        # Session-scoped system text first: the stable prefix ends after it.
        system_c = [c for c in by_slot["system"] if c.scope == "session"]
        stable = len(system_c)
        system_c += [c for c in by_slot["system"] if c.scope == "turn"]
        system = tuple(
            SystemBlock(text=c.text, source=c.source, cache_breakpoint=(i == stable - 1))
            for i, c in enumerate(system_c)
        )
        overrides = dict(ctx.overrides)
        first_index = view.first_user
        last_index = view.last_user
        first_text = "\n\n".join(c.text for c in by_slot["first-user"])
        last_text = "\n\n".join(c.text for c in by_slot["last-user"])
        if first_text and first_index is not None:
            base = overrides.get(first_index, view[first_index])
            overrides[first_index] = adapter.append_user_content(base, first_text)
        if last_text and last_index is not None:
            base = overrides.get(last_index, view[last_index])
            overrides[last_index] = adapter.append_user_content(base, last_text)
        tail_c = by_slot["virtual-tail"]
        tail = [adapter.create_user("\n\n".join(c.text for c in tail_c))] if tail_c else []
        messages = CompiledMessages(view, n, overrides, tail)
        view.track(messages)
        contributions = tuple(ctx.contributions)
        segments: Sequence[Segment] = ()
        prefix = stable_tokens = 0
        if self.meter is not None:
            segments, prefix, stable_tokens = self._account(
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
        self._remember(system_c, tools, first_index, first_text, last_index, last_text)
        view.mark_compiled()
        return CompiledContext(
            system=system,
            messages=messages,
            contributions=contributions,
            turn_index=ctx.turn_index,
            step=ctx.step,
            generation=self.transcript.generation,
            stable_blocks=stable,
            segments=segments,
            prefix_tokens=prefix,
            stable_tokens=stable_tokens,
        )

    # -- accounting ------------------------------------------------------------

    def _account(
        self,
        contributions: tuple[Contribution, ...],
        system_c: list[Contribution],
        stable: int,
        tools: tuple[ToolSpec, ...],
        by_slot: dict[str, list[Contribution]],
        first: tuple[int | None, str],
        last: tuple[int | None, str],
        replaced: Mapping[int, T],
        owners: Mapping[int, tuple[str, str]],
    ) -> tuple[Segments, int, int]:
        """Segments, reused prefix tokens and stable tokens: O(contributions + replacements).

        ``first`` / ``last`` are the first and last user messages' indexes with
        the text added to them.
        """
        meter = self.meter
        assert meter is not None
        key = (tools, contributions)  # everything the contributions' figures depend on
        tally = self._tally
        if tally is None or tally.key != key:  # mostly the very objects of the last compile
            tally = self._tally = self._count_contributions(key, system_c, stable, by_slot)
        view = self.view
        segments = tally.head.plus(
            _history_rows(
                self._replacement_pieces(replaced, owners),
                view,
                include_content=meter.include_content,
            )
        )
        reused = self._reuse(tools, system_c, tally.head_tokens)
        if reused is not None:
            reused += view.tokens_before(self._message_bound(first, last, replaced))
        return segments, reused or 0, tally.stable_tokens

    def _count_contributions(
        self,
        key: tuple[tuple[ToolSpec, ...], tuple[Contribution, ...]],
        system_c: list[Contribution],
        stable: int,
        by_slot: dict[str, list[Contribution]],
    ) -> _Tally:
        meter = self.meter
        assert meter is not None
        tools = key[0]
        pieces: list[Piece] = []
        tools_piece = None
        if tools:
            if self._tools_piece is None or self._tools_piece[0] != tools:
                text = "".join(t.name + t.description + str(t.input_schema) for t in tools)
                self._tools_piece = (tools, meter.piece("tools", "engine", "tools", "tools", text))
            tools_piece = self._tools_piece[1]
            pieces.append(tools_piece)
        piece = meter.piece
        pieces.extend(piece(c.source, c.module, c.processor, "system", c.text) for c in system_c)
        for slot in ("first-user", "last-user", "virtual-tail"):
            made = by_slot[slot]
            pieces.extend(piece(c.source, c.module, c.processor, slot, c.text) for c in made)
        return _tally(key, pieces, tools_piece, stable, len(system_c))

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
        self, tools: tuple[ToolSpec, ...], system_c: list[Contribution], head_tokens: int
    ) -> int | None:
        """Reused tokens of tools and system; None when something before the messages changed."""
        prev = self._prev
        if prev.generation != self.transcript.generation:
            return None
        if (tools or prev.tools) and prev.tools != tools:
            return None
        if len(prev.system) != len(system_c):
            return None
        for text, c in zip(prev.system, system_c, strict=True):
            if text != c.text:
                return None
        return head_tokens

    def _message_bound(
        self, first: tuple[int | None, str], last: tuple[int | None, str], replaced: Mapping[int, T]
    ) -> int:
        """How many leading view messages the previous call sent identically."""
        prev = self._prev
        view = self.view
        bound = min(prev.view_len, len(view))
        if view.min_changed is not None:
            bound = min(bound, view.min_changed)
        for old, (index, text) in ((prev.last_user, last), (prev.first_user, first)):
            now = (index, text) if text and index is not None else None
            if old is not None and now != old:
                bound = min(bound, old[0])
            if now is not None and now != old:
                bound = min(bound, now[0])
        for index in replaced:
            bound = min(bound, index)
        return bound

    def _remember(
        self,
        system_c: list[Contribution],
        tools: tuple[ToolSpec, ...],
        first_index: int | None,
        first_text: str,
        last_index: int | None,
        last_text: str,
    ) -> None:
        self._prev = _Prev(
            system=tuple(c.text for c in system_c),
            tools=tools,
            view_len=len(self.view),
            last_user=(last_index, last_text) if last_text and last_index is not None else None,
            first_user=(first_index, first_text)
            if first_text and first_index is not None
            else None,
            generation=self.transcript.generation,
        )

    def record_call(
        self,
        compiled: CompiledContext[T],
        *,
        model: str,
        usage: Usage,
        cost: CostEstimate,
    ) -> CallSnapshot | None:
        """Attach the provider's usage and cost to a compiled request (accounting on)."""
        if self.meter is None or self._turn is None:
            return None
        segments = compiled.segments
        call = CallSnapshot(
            step=compiled.step,
            model=model,
            tokenizer=self.meter.tokenizer.name,
            exact=self.meter.tokenizer.exact,
            segments=segments,
            chars=segments.chars
            if isinstance(segments, Segments)
            else sum(s.chars for s in segments),
            tokens=compiled.tokens,
            prefix_tokens=compiled.prefix_tokens,
            stable_tokens=compiled.stable_tokens,
            usage=usage,
            cost=cost,
        )
        self._turn.calls.append(call)
        if self._turn.pending is compiled:
            self._turn.pending = None
        return call

    def end_turn(self) -> TurnSnapshot | None:
        """Close the current turn: take its snapshot and hand it to the sinks."""
        self._alive()
        return self._flush_turn()

    def _flush_turn(self) -> TurnSnapshot | None:
        turn, self._turn = self._turn, None
        if turn is None or self.meter is None:
            return None
        if turn.pending is not None:  # compiled, but the call never reported usage
            pending = turn.pending
            self._turn = turn
            self.record_call(pending, model=self.meter.model, usage=_NO_USAGE, cost=_NO_COST)
            self._turn = None
        if not turn.calls:
            return None
        snapshot = TurnSnapshot(
            session_id=self.session_id,
            turn_index=turn.turn_index,
            calls=tuple(turn.calls),
            started_at=turn.started_at,
        )
        self.summary.append(snapshot)
        if self.retain_turns is not None and len(self.summary) > self.retain_turns:
            del self.summary[0]  # one at a time: the list never holds more than the bound
        self._totals.add(snapshot)
        if self._sinks is not None:
            self._sinks.emit(snapshot)
        return snapshot

    def session_summary(self) -> SessionSummary:
        """Totals over every turn snapshot taken so far (also those no longer kept)."""
        return self._totals.summary(self.session_id, retained_turns=len(self.summary))

    def adopt_telemetry(self, previous: ContextCompiler[T]) -> None:
        """Carry another engine's kept snapshots and totals over (one session, new engine)."""
        self._totals = previous._totals.copy()
        self.summary = list(previous.summary)
        if self.retain_turns is not None:
            del self.summary[: max(0, len(self.summary) - self.retain_turns)]

    # -- lifecycle -------------------------------------------------------------

    async def _setup(self) -> None:
        if self._set_up:
            return
        self._set_up = True
        for module in self.modules:
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
            for module in reversed(self.modules):
                try:
                    await module.teardown()
                except Exception as exc:  # every module gets its teardown
                    log.exception("module %r failed to tear down", module.name)
                    errors.append(exc)
        self._session_cache.clear()
        self._turn_cache = {}
        self.view.clear()
        if errors:
            raise ContextError("a module failed to tear down") from errors[0]

    def _alive(self) -> None:
        if self._destroyed:
            raise CompilerDestroyedError("this context compiler was destroyed")


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


def _negated(p: Piece) -> Piece:
    return Piece(p.source, p.module, p.processor, p.slot, -p.chars, -p.tokens)


@dataclass(frozen=True, slots=True)
class _Tally:
    """A compile's counted contributions, kept while the next compiles send the same."""

    key: tuple[tuple[ToolSpec, ...], tuple[Contribution, ...]]
    """(tools, contributions): what the rows depend on."""
    head: Segments
    """The contributions' rows (tools, system, user slots, tail)."""
    stable_tokens: int
    """Tools and system blocks before the prompt-cache breakpoint."""
    head_tokens: int
    """Tools and every system block: what a call reuses when they did not change."""


def _tally(
    key: tuple[tuple[ToolSpec, ...], tuple[Contribution, ...]],
    pieces: list[Piece],
    tools: Piece | None,
    stable: int,
    system: int,
) -> _Tally:
    """Group the pieces (tools, system blocks, then the other slots) into rows."""
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    contents: dict[tuple[str, str, str, str], list[str]] = {}
    for p in pieces:
        _group(grouped, contents, p)
    first = 1 if tools is not None else 0
    system_tokens = [p.tokens for p in pieces[first : first + system]]
    tools_tokens = tools.tokens if tools is not None else 0
    return _Tally(
        key,
        Segments(_rows(grouped, contents)),
        tools_tokens + sum(system_tokens[:stable]),
        tools_tokens + sum(system_tokens),
    )


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
    pieces: list[Piece], view: ModelView[Any], *, include_content: bool
) -> Sequence[SegmentRow]:
    """Rows for the history: turn-only replacement pieces, then the view's running totals."""
    if not pieces and not include_content:  # the usual compile: the totals as they are
        return [
            (source, module, processor, "history", chars, tokens, None)
            for (source, module, processor), (chars, tokens) in view.totals.items()
        ]
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    contents: dict[tuple[str, str, str, str], list[str]] = {}
    for p in pieces:
        _group(grouped, contents, p)
    if include_content:
        for index in range(len(view)):
            for p in view.pieces(index):
                if p.content is not None:
                    contents.setdefault((p.source, p.module, p.processor, "history"), []).append(
                        p.content
                    )
    for (source, module, processor), (chars, tokens) in view.totals.items():
        key = (source, module, processor, "history")
        entry = grouped.get(key)
        if entry is None:
            grouped[key] = [chars, tokens]
        else:
            entry[0] += chars
            entry[1] += tokens
    return _rows(grouped, contents)
