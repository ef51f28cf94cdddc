"""An agent for the terminal tests of ``mainspring chat`` (``tests.chat_agent:agent``).

"story" streams a long answer slowly (a pause before each small delta), long
enough to press Ctrl-C in the middle of it; anything else is echoed at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring import Agent, Message, ScriptedModel, ScriptedResponse
from mainspring.models.base import ToolSpec

STORY = "Once upon a time " + "and then " * 500 + "the end."
"""About 4,500 characters: minutes at 4 characters every 0.05 s, so a test
that waits for the cancellation never sees the story end first."""


def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
    text = messages[-1].text
    if "story" in text:
        return ScriptedResponse(text=STORY, delay=0.05)
    return f"You said: {text}"


agent = Agent(name="echo", model=ScriptedModel(answer, chunk_size=4))
