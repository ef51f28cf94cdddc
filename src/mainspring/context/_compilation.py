"""The processors' side of a compile: what one processor sees and may do.

A :class:`Compilation` is handed to every processor of one compile: it reads
the transcript, the history view, services and config, collects the
contributions, and (turn-scoped processors only) replaces messages for this
request or edits the view. It reads them from its :class:`CompileHost`, the
compiler running the compile, and knows the running processor only by the
few attributes of :class:`RunningProcessor` (the processors' module,
``pipeline``, types its ``process`` method with this one).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

from mainspring.context.transcript import MessageAdapter, Transcript
from mainspring.context.view import ModelView
from mainspring.errors import ContextError, ProcessorScopeError

__all__ = [
    "CacheScope",
    "Compilation",
    "CompileHost",
    "Contribution",
    "RunningProcessor",
    "Slot",
]

T = TypeVar("T")

Slot: TypeAlias = Literal["system", "first-user", "last-user", "virtual-tail"]

CacheScope: TypeAlias = Literal["session", "turn"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Contribution:
    """Text a processor adds to a slot, with where it came from."""

    slot: Slot
    text: str
    source: str
    """The kind of content: system, context, memory, skill, reminder, …"""
    module: str
    processor: str
    scope: CacheScope


class CompileHost(Protocol[T]):
    """What a compile reads from the compiler running it."""

    @property
    def transcript(self) -> Transcript[T]:
        """The committed transcript."""
        ...

    @property
    def view(self) -> ModelView[T]:
        """The model's history view, up to date."""
        ...

    @property
    def adapter(self) -> MessageAdapter[T]:
        """The host's message adapter."""
        ...

    @property
    def services(self) -> Mapping[str, Any]:
        """The compiler's services."""
        ...

    @property
    def config(self) -> Mapping[str, Mapping[str, Any]]:
        """Each module's config, by module name."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the compiler's tokenizer."""
        ...


class RunningProcessor(Protocol):
    """What a compile knows of the processor running in it."""

    @property
    def id(self) -> str:
        """The processor's id."""
        ...

    @property
    def module(self) -> str:
        """The owning module's name."""
        ...

    @property
    def source(self) -> str:
        """The source type its contributions carry unless it names another."""
        ...

    @property
    def slot(self) -> Slot | None:
        """The slot its contributions go to unless it names another."""
        ...

    @property
    def scope(self) -> CacheScope:
        """``"session"`` (may only contribute) or ``"turn"``."""
        ...


class Compilation(Generic[T]):
    """What a processor sees and may do during one compile."""

    def __init__(
        self, compiler: CompileHost[T], turn_index: int, step: int, turn_cache: dict[str, Any]
    ) -> None:
        """One compile by ``compiler``: turn ``turn_index``, model step ``step``."""
        self.compiler = compiler
        """The compiler running this compile."""
        self.turn_index = turn_index
        self.step = step
        self.turn_cache = turn_cache
        """Shared by the compiles of one turn (e.g. memory recalled once per turn)."""
        self.contributions: list[Contribution] = []
        self.overrides: dict[int, T] = {}
        self.override_owners: dict[int, tuple[str, str]] = {}
        self.tail: list[T] = []
        self._current: RunningProcessor | None = None

    @property
    def engine(self) -> CompileHost[T]:
        """Deprecated: the compiler running this compile (read :attr:`compiler`)."""
        warnings.warn(
            "Compilation.engine is deprecated; read Compilation.compiler",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.compiler

    # -- reading -----------------------------------------------------------

    @property
    def transcript(self) -> Transcript[T]:
        """The committed transcript (read it; never change it)."""
        return self.compiler.transcript

    @property
    def messages(self) -> ModelView[T]:
        """The model's history view."""
        return self.compiler.view

    @property
    def services(self) -> Mapping[str, Any]:
        """The compiler's services (e.g. ``"memory"``)."""
        return self.compiler.services

    def config(self, module: str | None = None) -> Mapping[str, Any]:
        """A module's config (default: the running processor's module)."""
        name = module if module is not None else (self._current.module if self._current else "")
        return self.compiler.config.get(name, {})

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message ("" when there is none)."""
        index = self.compiler.transcript.last_user_index
        if index is None:
            return ""
        message = self.compiler.transcript.messages[index]
        return "\n".join(self.compiler.adapter.text_segments(message))

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the compiler's tokenizer (an estimate without accounting)."""
        return self.compiler.count_tokens(text)

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
        if not 0 <= index < len(self.compiler.view):
            raise IndexError(f"message index {index} out of range")
        self.overrides[index] = message
        self.override_owners[index] = (proc.module, proc.id)

    def edit_history(self) -> _HistoryEditor[T]:
        """Persistent edits of the view (compaction), attributed to this processor."""
        proc = self._structural("edit the history")
        return _HistoryEditor(self.compiler.view, proc.module, proc.id)

    def _structural(self, what: str) -> RunningProcessor:
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
