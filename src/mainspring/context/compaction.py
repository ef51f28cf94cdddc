"""Compaction: keep the history inside a context budget.

When the model's history view passes ``trigger * budget`` tokens
(default 85% of 200,000), :class:`Compaction` brings it down to ``target *
budget``:

1. **Prune** — deterministic: the oldest tool results, outside the last
   ``keep_recent_turns`` turns, are replaced by a one-line note saying how
   much was pruned. Calls and results stay paired; only content shrinks.
2. **Summarize** — optional, when pruning was not enough and a
   ``summarizer`` is given: the oldest whole turns (cut at a user message,
   so a tool call is never split from its result) become one user message
   holding a summary. A failing summarizer is logged; the pruned history
   stands.
3. **Prune within the turn** — in the middle of a turn (the view ends with tool
   results the model has not answered), still over the target: the older
   results of the recent turns too, oldest first, so one long turn of many
   large results stays near the budget. The latest results are never pruned:
   the model has not seen them yet.

Compaction edits the view, not the transcript: the committed messages stay
as they were, and the view's changed prefix is reported as reuse lost.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mainspring.context.pipeline import Phase, Processor
from mainspring.errors import ConfigError
from mainspring.messages import Message, Part, ToolResultPart

if TYPE_CHECKING:
    from mainspring.context._compilation import Compilation, _HistoryEditor
    from mainspring.context.view import ModelView
    from mainspring.models.base import Model

__all__ = ["Compaction", "Summarizer", "model_summarizer"]

log = logging.getLogger("mainspring.context")

Summarizer = Callable[[Sequence[Message]], Awaitable[str]]
"""Writes a summary of the given messages."""

PRUNED = "[tool result pruned to save context: {n} characters]"
SUMMARY_HEADING = "[Summary of the earlier conversation]"


class Compaction(Processor):
    """Prunes old tool results, then optionally summarizes old turns."""

    phase: Phase = "history"
    source = "summary"

    def __init__(
        self,
        budget: int = 200_000,
        *,
        trigger: float = 0.85,
        target: float = 0.6,
        keep_recent_turns: int = 2,
        summarizer: Summarizer | None = None,
        id: str = "compaction",
    ) -> None:
        """Compact when history passes ``trigger * budget`` tokens, down to ``target``."""
        super().__init__(id, after=("tool-result-budget", "microcompact"))
        if budget < 1:
            raise ConfigError(f"context budget must be positive, got {budget}")
        if not 0 < target <= trigger <= 1:
            raise ConfigError(f"need 0 < target <= trigger <= 1, got {target} and {trigger}")
        if keep_recent_turns < 0:
            raise ConfigError("keep_recent_turns must not be negative")
        self.budget = budget
        self.trigger = trigger
        self.target = target
        self.keep_recent_turns = keep_recent_turns
        self.summarizer = summarizer
        self.runs = 0
        """How many times compaction ran."""
        self.pruned = 0
        """Tool results pruned so far."""
        self.summaries = 0
        self.warned = False
        """Whether the history was left over the budget once (said once, in the log)."""
        self.reset()

    @property
    def waits(self) -> bool:  # type: ignore[override]  # (a plain attribute on Processor)
        """Only a summarizer is waited for: pruning computes."""
        return self.summarizer is not None

    def reset(self) -> None:
        """The view is rebuilt: nothing in it is pruned yet."""
        self._pruned_upto = 0
        """Every tool result before this view index is already pruned."""

    async def process(self, ctx: Compilation[Any]) -> None:
        """Compact the view when it is over the trigger."""
        view = ctx.messages
        if view.tokens_within(self.trigger * self.budget):  # counts new text only if it may pass
            return
        self.runs += 1
        goal = self.target * self.budget
        latest = _unanswered(view)
        protected = min(_recent_start(view, self.keep_recent_turns), latest)
        editor = ctx.edit_history()
        start = self._pruned_upto
        # One pass over the entries not yet pruned; only tool results can shrink.
        for index in range(start, protected):  # by index: no walk over what is done
            message = view[index]
            if not isinstance(message, Message) or message.role != "tool":
                continue
            if view.tokens <= goal:
                self._pruned_upto = index
                return
            self._pruned_upto = index + 1
            pruned = _prune(message)
            if pruned is not message:
                editor.replace(index, pruned)
                self.pruned += 1
        self._pruned_upto = max(start, protected)
        if view.tokens > goal and self.summarizer is not None:
            await self._summarize(view, editor, protected, goal)
        latest = _unanswered(view)
        if view.tokens > goal and latest < len(view):
            # Still over in the middle of a turn: the recent turns' older results too
            # (one long turn's), oldest first, never the latest, which the model has
            # not answered yet.
            self._prune_recent(view, editor, goal, latest)
        if view.tokens > self.budget and not self.warned:
            self.warned = True
            why = "no summarizer is set" if self.summarizer is None else "no summary fits"
            log.warning(
                "the context is over its budget after compaction (%d tokens, budget %d): "
                "only tool results can be pruned and %s; the model gets the whole request "
                "(give ContextOptions(summarizer=...), or a larger budget)",
                view.tokens,
                self.budget,
                why,
            )

    async def _summarize(
        self, view: ModelView[Any], editor: _HistoryEditor[Any], protected: int, goal: float
    ) -> None:
        """The oldest whole turns before ``protected`` as one summary, if it gets written."""
        assert self.summarizer is not None
        cut = _summary_cut(view, protected, view.tokens - goal)
        if cut <= 0:
            return
        try:
            summary = (await self.summarizer(list(view[:cut]))).strip()
        except Exception:
            log.warning("compaction summary failed; keeping the pruned history", exc_info=True)
            return
        if summary:
            editor.splice(0, cut, [Message.user(f"{SUMMARY_HEADING}\n{summary}")])
            self._pruned_upto = 1
            self.summaries += 1

    def _prune_recent(
        self, view: ModelView[Any], editor: _HistoryEditor[Any], goal: float, latest: int
    ) -> None:
        """Prune tool results from ``_pruned_upto`` up to ``latest`` until under ``goal``."""
        start = self._pruned_upto
        if start >= latest:
            return
        for index in range(start, latest):
            message = view[index]
            if view.tokens <= goal:
                return
            self._pruned_upto = index + 1
            if isinstance(message, Message) and message.role == "tool":
                pruned = _prune(message)
                if pruned is not message:
                    editor.replace(index, pruned)
                    self.pruned += 1


def _unanswered(view: ModelView[Any]) -> int:
    """The index of the tool results the model has not answered yet (``len(view)``: none).

    Those are the view's last tool message when no assistant message follows it
    (user messages may: steering taken at the step boundary).
    """
    for index in range(len(view) - 1, -1, -1):
        message = view[index]
        role = message.role if isinstance(message, Message) else None
        if role == "tool":
            return index
        if role != "user":
            break
    return len(view)


_SHORTEST_NOTE = len(PRUNED.format(n=0))
"""A result this short or shorter never shrinks by pruning (its note is as long)."""


def _prune(message: Message) -> Message:
    parts = message.parts
    new: list[Part] | None = None
    for i, part in enumerate(parts):
        if (
            isinstance(part, ToolResultPart)
            and len(part.content) > _SHORTEST_NOTE
            and not part.content.startswith("[tool result pruned")
        ):
            note = PRUNED.format(n=len(part.content))
            if len(note) < len(part.content):
                if new is None:
                    new = list(parts)
                new[i] = replace(part, content=note)
    return message if new is None else replace(message, parts=tuple(new))


def _recent_start(view: ModelView[Any], keep: int) -> int:
    """Index where the last ``keep`` turns start (everything before may be compacted)."""
    if keep == 0:
        return len(view)
    starts = view.user_indices
    if len(starts) <= keep:
        return 0
    return starts[-keep]


def _summary_cut(view: ModelView[Any], protected: int, excess: float) -> int:
    """The smallest turn boundary whose prefix holds ``excess`` tokens (≤ protected)."""
    best = 0
    for start in view.user_indices:
        if start == 0 or start > protected:
            continue
        best = start
        if view.tokens_before(start) >= excess:
            break
    return best


def model_summarizer(
    model: Model, *, instructions: str | None = None, max_tokens: int = 1_000
) -> Summarizer:
    """A summarizer that asks ``model`` for the summary."""
    from mainspring.events import TextDelta
    from mainspring.models.base import ModelRequest, ModelSettings, SystemBlock

    prompt = instructions or (
        "Summarize the conversation so far for your own later use: the user's goals, "
        "decisions made, facts learned from tools, and what remains open. Be concise."
    )

    async def summarize(messages: Sequence[Message]) -> str:
        request = ModelRequest(
            system=(SystemBlock(text=prompt, source="compaction"),),
            messages=[*messages, Message.user("Write the summary now.")],
            settings=ModelSettings(max_tokens=max_tokens),
        )
        chunks = [e.text async for e in model.stream(request) if isinstance(e, TextDelta)]
        return "".join(chunks)

    return summarize
