"""Pydantic AI on mainspring's context pipeline: the adapter, and a real agent's history."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("pydantic_ai", reason="needs pydantic-ai-slim (the pydantic-ai extra)")

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mainspring.context import (
    Accounting,
    BaseSystemPrompt,
    Compilation,
    ContextCompiler,
    LastUserProcessor,
    PydanticAIAdapter,
    PydanticAIHistory,
)
from mainspring.errors import PrefixMutationError
from mainspring.tokens import EstimateTokenizer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Pydantic AI runs on asyncio only


ADAPTER = PydanticAIAdapter()


def request(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(content=text)])


def test_the_adapter_reads_roles_text_and_tool_links() -> None:
    call = ModelResponse(
        parts=[TextPart(content="let me look"), ToolCallPart("lookup", {"q": "x"}, "c1")]
    )
    answer = ModelRequest(parts=[ToolReturnPart("lookup", "found it", "c1")])
    retry = ModelRequest(parts=[ToolReturnPart("lookup", "bad args", "c2", outcome="retried")])
    feedback = ModelRequest(
        parts=[RetryFeedbackPart(content="try again", retry=RetryInfo("no_output"))]
    )
    system = ModelRequest(parts=[SystemPromptPart(content="rules")])
    assert [ADAPTER.role(m) for m in (request("hi"), call, answer, retry, feedback, system)] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "system",
    ]
    assert ADAPTER.tool_call_ids(call) == ["c1"] and ADAPTER.tool_result_ids(answer) == ["c1"]
    assert ADAPTER.tool_result_ids(retry) == ["c2"] and ADAPTER.tool_call_ids(answer) == []
    assert ADAPTER.segments(call) == [
        ("assistant", "let me look"),
        ("tool_call", 'lookup{"q":"x"}'),
    ]
    assert ADAPTER.text_segments(answer) == ["found it"]
    assert ADAPTER.segments(system) == [("system", "rules")]
    assert ADAPTER.segments(feedback)[0][0] == "tool_result"


def test_fingerprints_follow_values_and_copies_are_independent() -> None:
    part = UserPromptPart(content="hi")
    original = ModelRequest(parts=[part])
    twin = copy.deepcopy(original)
    assert ADAPTER.fingerprint(original) == ADAPTER.fingerprint(twin)
    clone = ADAPTER.clone(original)
    assert clone is not original and ADAPTER.fingerprint(clone) == ADAPTER.fingerprint(original)
    changed = ModelRequest(parts=[UserPromptPart(content="bye", timestamp=part.timestamp)])
    assert ADAPTER.fingerprint(changed) != ADAPTER.fingerprint(original)
    augmented = ADAPTER.append_user_content(original, "(note)")
    assert ADAPTER.text_segments(augmented) == ["hi", "(note)"]
    assert ADAPTER.text_segments(original) == ["hi"]  # the original is untouched
    assert ADAPTER.role(ADAPTER.create_user("new")) == "user"
    with pytest.raises(TypeError):
        ADAPTER.append_user_content(ModelResponse(parts=[TextPart(content="x")]), "y")


class Reminder(LastUserProcessor):
    """A turn-scoped note appended to the latest user message."""

    async def process(self, ctx: Compilation[ModelMessage]) -> None:
        ctx.contribute("(answer briefly)")


def new_compiler(*, strict: bool = True) -> ContextCompiler[ModelMessage]:
    return ContextCompiler(
        adapter=PydanticAIAdapter(),
        processors=[BaseSystemPrompt("House rules: cite sources."), Reminder()],
        accounting=Accounting(tokenizer=EstimateTokenizer("test")),
        strict=strict,
    )


async def test_a_pydantic_ai_agent_runs_on_the_context_pipeline() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if not any(
            isinstance(p, ToolReturnPart)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
        ):
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "tides"}, "call-1")])
        return ModelResponse(parts=[TextPart(content="High tide at noon.")])

    compiler = new_compiler()  # strict: a changed prefix would raise
    history = PydanticAIHistory(compiler)
    agent = PydanticAgent(FunctionModel(model), capabilities=[ProcessHistory(history)])

    @agent.tool_plain
    def lookup(q: str) -> str:
        """Look something up."""
        return f"tide table for {q}"

    result = await agent.run("When is high tide?")
    assert result.output == "High tide at noon."
    assert len(seen) == 2
    for sent in seen:  # every request the model got was compiled by mainspring
        first = sent[0]
        assert isinstance(first, ModelRequest)
        systems = [p.content for p in first.parts if isinstance(p, SystemPromptPart)]
        assert systems == ["House rules: cite sources."]
    last_user = [p.content for p in seen[0][-1].parts if isinstance(p, UserPromptPart)]
    assert last_user == ["When is high tide?", "(answer briefly)"]
    # the transcript holds the host's own messages, once each, unaugmented
    roles = [compiler.adapter.role(m) for m in compiler.transcript.messages]
    assert roles == ["user", "assistant", "tool"]
    assert ADAPTER.text_segments(compiler.transcript.messages[0]) == ["When is high tide?"]
    assert history.last is not None
    sources = {s.source for s in history.last.segments}
    assert {"system", "user", "tool_call", "tool_result"} <= sources

    # a second run continues the same history: the prefix still holds
    again = await agent.run("And low tide?", message_history=result.all_messages())
    assert again.output == "High tide at noon."
    roles = [compiler.adapter.role(m) for m in compiler.transcript.messages]
    # the first run's answer, then the new question (the processor runs before each call)
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert compiler.transcript.generation == 0


async def test_a_rewritten_history_is_refused_in_strict_mode() -> None:
    compiler = new_compiler()
    history = PydanticAIHistory(compiler)
    first: list[ModelMessage] = [request("one"), ModelResponse(parts=[TextPart(content="two")])]
    await history(first)
    with pytest.raises(PrefixMutationError):
        await history([request("rewritten"), *first[1:], request("three")])
    assert len(compiler.transcript) == 2  # nothing changed


async def test_a_relaxed_compiler_takes_a_rewritten_history_as_a_new_generation() -> None:
    compiler = new_compiler(strict=False)
    history = PydanticAIHistory(compiler)
    await history([request("one"), ModelResponse(parts=[TextPart(content="two")])])
    out = await history([request("rewritten")])
    assert compiler.transcript.generation == 1
    assert [ADAPTER.text_segments(m)[0] for m in compiler.transcript.messages] == ["rewritten"]
    assert isinstance(out[0], ModelRequest)


def test_without_the_extra_the_adapter_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install \"mainspring\[pydantic-ai\]\""):
        PydanticAIAdapter()


def test_the_processor_needs_the_adapter() -> None:
    with pytest.raises(TypeError, match="PydanticAIAdapter"):
        PydanticAIHistory(ContextCompiler())
