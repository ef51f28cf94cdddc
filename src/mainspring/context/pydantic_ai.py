"""A bridge for Pydantic AI: mainspring's context pipeline over its own messages.

Pydantic AI keeps its history as ``ModelMessage`` s (``ModelRequest`` /
``ModelResponse``) and lets a *history processor* rewrite that list before
each model request. This module gives the context pipeline what it needs to
work on those messages directly:

- :class:`PydanticAIAdapter`, the :class:`~mainspring.context.MessageAdapter`
  (plus tool-call lookup and per-source segments for accounting) for
  ``ModelMessage``;
- :class:`PydanticAIHistory`, a history processor that commits the history
  to a :class:`~mainspring.context.ContextCompiler` (O(new messages): the
  identity fast path) and returns the compiled messages, with the compiled
  system blocks as ``SystemPromptPart`` s at the front.

```python
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory

from mainspring.context import (
    BaseSystemPrompt, ContextCompiler, PydanticAIAdapter, PydanticAIHistory
)

compiler = ContextCompiler(adapter=PydanticAIAdapter(), processors=[BaseSystemPrompt("…")])
agent = Agent(model, capabilities=[ProcessHistory(PydanticAIHistory(compiler))])
```

Pydantic AI keeps what a history processor returns as the run's history, so
the next call hands the processed messages back. The processor maps each
message it produced back to the original it came from and drops the
synthetic ones (a virtual tail), so the transcript only ever sees the host's
own messages and the prefix guard holds. Needs the ``pydantic-ai`` extra;
``pydantic_ai`` is imported when an adapter is built, not before.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from mainspring.context.compiler import CompiledContext, ContextCompiler
from mainspring.context.transcript import json_fingerprint

_HINT = 'PydanticAIAdapter needs: pip install "mainspring[pydantic-ai]"'


def _messages() -> ModuleType:
    """``pydantic_ai.messages``, imported on first use: the extra is optional."""
    try:
        from pydantic_ai import messages
    except ImportError as exc:
        raise ImportError(_HINT) from exc
    # Pydantic AI resolves a history processor's annotations at run time.
    globals().setdefault("ModelMessage", messages.ModelMessage)
    return messages


class _OnUse:
    """Stands for ``pydantic_ai.messages`` until a name is first read from it."""

    def __getattr__(self, name: str) -> object:
        return getattr(_messages(), name)


if TYPE_CHECKING:
    from pydantic_ai import messages as pai
    from pydantic_ai.messages import ModelMessage
else:
    pai = _OnUse()

__all__ = ["PydanticAIAdapter", "PydanticAIHistory"]


def _user_text(part: pai.UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(item for item in part.content if isinstance(item, str))


class PydanticAIAdapter:
    """The :class:`~mainspring.context.MessageAdapter` for Pydantic AI's ``ModelMessage``.

    Roles: a response is ``"assistant"``; a request holding a user prompt is
    ``"user"``, one holding only tool returns or retry feedback ``"tool"``, one
    holding only system prompts ``"system"``. Parts it does not know (files,
    instructions deltas) are kept as they are and not counted.
    """

    def __init__(self) -> None:
        """Check the extra is installed.

        Raises:
            ImportError: ``pydantic-ai-slim`` is missing (the message names the extra).
        """
        _messages()

    def clone(self, message: ModelMessage) -> ModelMessage:
        """A deep copy (Pydantic AI messages are mutable dataclasses)."""
        return copy.deepcopy(message)

    def fingerprint(self, message: ModelMessage) -> bytes:
        """blake2b of the message as Pydantic AI serializes it (JSON mode)."""
        data = pai.ModelMessagesTypeAdapter.dump_python([message], mode="json")
        return json_fingerprint(data)

    def role(self, message: ModelMessage) -> str:
        """``"assistant"``, ``"user"``, ``"tool"`` or ``"system"`` (see the class docstring)."""
        if isinstance(message, pai.ModelResponse):
            return "assistant"
        kinds = {type(p) for p in message.parts}
        if pai.UserPromptPart in kinds:
            return "user"
        if kinds & {pai.ToolReturnPart, pai.RetryPromptPart, pai.RetryFeedbackPart}:
            return "tool"
        return "system" if kinds else "user"

    def text_segments(self, message: ModelMessage) -> Sequence[str]:
        """The text of each text-bearing part, in order."""
        return [text for _, text in self.segments(message)]

    def segments(self, message: ModelMessage) -> Sequence[tuple[str, str]]:
        """The message's text by source (``user``, ``system``, ``tool_result``, …)."""
        out: list[tuple[str, str]] = []
        if isinstance(message, pai.ModelResponse):
            for rpart in message.parts:
                if isinstance(rpart, pai.TextPart):
                    out.append(("assistant", rpart.content))
                elif isinstance(rpart, pai.ToolCallPart):
                    out.append(("tool_call", rpart.tool_name + rpart.args_as_json_str()))
                elif isinstance(rpart, pai.ThinkingPart):
                    out.append(("thinking", rpart.content))
            return out
        for part in message.parts:
            if isinstance(part, pai.UserPromptPart):
                out.append(("user", _user_text(part)))
            elif isinstance(part, pai.SystemPromptPart):
                out.append(("system", part.content))
            elif isinstance(part, pai.ToolReturnPart):
                out.append(("tool_result", part.model_response_str()))
            elif isinstance(part, pai.RetryFeedbackPart):
                out.append(("tool_result", part.model_response()))
            elif isinstance(part, pai.RetryPromptPart):
                content = part.content
                text = content if isinstance(content, str) else json.dumps(content, default=str)
                out.append(("tool_result", text))
        return out

    def create_user(self, text: str) -> ModelMessage:
        """A request holding one user prompt."""
        return pai.ModelRequest(parts=[pai.UserPromptPart(content=text)])

    def append_user_content(self, message: ModelMessage, text: str) -> ModelMessage:
        """A copy of the request with one more user-prompt part at its end."""
        if not isinstance(message, pai.ModelRequest):
            raise TypeError("append_user_content takes a ModelRequest")
        return dataclasses.replace(
            message, parts=[*message.parts, pai.UserPromptPart(content=text)]
        )

    def tool_call_ids(self, message: ModelMessage) -> Sequence[str]:
        """Ids of the tool calls a response makes."""
        if not isinstance(message, pai.ModelResponse):
            return []
        return [p.tool_call_id for p in message.parts if isinstance(p, pai.ToolCallPart)]

    def tool_result_ids(self, message: ModelMessage) -> Sequence[str]:
        """Ids of the tool calls a request answers (tool returns and retry prompts)."""
        if not isinstance(message, pai.ModelRequest):
            return []
        return [
            p.tool_call_id
            for p in message.parts
            if isinstance(p, pai.ToolReturnPart)
            or (isinstance(p, pai.RetryPromptPart) and p.tool_name is not None)
        ]


class PydanticAIHistory:
    """A Pydantic AI history processor running a :class:`ContextCompiler` (see the module).

    Args:
        compiler: The compiler to run; build it with ``adapter=PydanticAIAdapter()``.
        system_blocks: Put the compiled system blocks at the front of the first
            request as ``SystemPromptPart`` s (after any it already has).
    """

    def __init__(
        self, compiler: ContextCompiler[ModelMessage], *, system_blocks: bool = True
    ) -> None:
        if not isinstance(compiler.adapter, PydanticAIAdapter):
            raise TypeError("the compiler needs adapter=PydanticAIAdapter()")
        _messages()
        self.compiler = compiler
        self.system_blocks = system_blocks
        self.last: CompiledContext[ModelMessage] | None = None
        """The last compiled context (its segments, tokens and system blocks)."""
        self._returned: list[ModelMessage] = []
        """What the last call returned: Pydantic AI hands it back, with new messages after."""

    def _history(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The host's own messages: the committed ones, then what is new since the last call."""
        previous = self._returned
        n = len(previous)
        if (
            n
            and len(messages) >= n
            and all(a is b for a, b in zip(messages[:n], previous, strict=True))
        ):
            return [*self.compiler.transcript.messages, *messages[n:]]
        return list(messages)  # a history we did not produce: take it as it is

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Commit the history, compile it, return the compiled messages.

        Raises PrefixMutationError (strict compiler) if the host rewrote a
        message already committed, and CompilerDestroyedError once the
        compiler was destroyed.
        """
        history = self._history(messages)
        self.compiler.sync(history)
        roles = [self.compiler.adapter.role(m) for m in history]
        turn = roles.count("user")
        last_user = len(roles) - 1 - roles[::-1].index("user") if turn else -1
        step = 1 + roles[last_user + 1 :].count("assistant")
        compiled = await self.compiler.compile(turn_index=max(turn, 1), step=step)
        self.last = compiled
        result = list(compiled.messages)
        if self.system_blocks and compiled.system:
            result = _with_system(result, [b.text for b in compiled.system if b.text])
        self._returned = list(result)
        return result


def _with_system(messages: list[ModelMessage], texts: list[str]) -> list[ModelMessage]:
    extra = [pai.SystemPromptPart(content=t) for t in texts]
    if messages and isinstance(messages[0], pai.ModelRequest):
        first = messages[0]
        head = [p for p in first.parts if isinstance(p, pai.SystemPromptPart)]
        rest = [p for p in first.parts if not isinstance(p, pai.SystemPromptPart)]
        messages[0] = dataclasses.replace(first, parts=[*head, *extra, *rest])
    else:
        messages.insert(0, pai.ModelRequest(parts=extra))
    return messages
