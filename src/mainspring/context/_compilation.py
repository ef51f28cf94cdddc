"""The processors' side of a compile: what one processor sees and may do.

A :class:`Compilation` is handed to every processor of one compile: it reads
the transcript, the history view, services and config, collects the
contributions, and (turn-scoped processors only) replaces messages for this
request or edits the view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mainspring.context.pipeline import Contribution, Processor, Slot
from mainspring.context.transcript import Transcript
from mainspring.context.view import ModelView
from mainspring.errors import ContextError, ProcessorScopeError

if TYPE_CHECKING:
    from mainspring.context.compiler import ContextCompiler

__all__ = ["Compilation"]

T = TypeVar("T")


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
