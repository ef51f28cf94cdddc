"""Agent configuration: grouped limits, the deprecated flat names, model strings."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from mainspring import Agent, Limits, ScriptedCall, ScriptedModel, ScriptedResponse, Session, tool
from mainspring.errors import ConfigError
from tests.helpers import send


@tool(read_only=True)
def tick() -> str:
    """Tick."""
    return "tock"


def looping() -> ScriptedModel:
    return ScriptedModel(
        lambda messages, tools: ScriptedResponse(tool_calls=[ScriptedCall("tick")])
    )


@pytest.mark.anyio
async def test_max_steps_counts_model_calls_in_a_turn() -> None:
    model = looping()
    session = Session(Agent(model=model, tools=[tick], limits=Limits(max_steps=3)))
    events = await send(session, "go")
    assert events[-1].type == "turn_complete" and len(model.requests) == 3


@pytest.mark.anyio
async def test_max_turns_still_works_and_says_it_is_deprecated() -> None:
    model = looping()
    with pytest.warns(DeprecationWarning, match=r"max_turns.*Limits"):
        agent = Agent(model=model, tools=[tick], max_turns=2)
    assert agent.limits.max_steps == 2 and agent.max_turns is None
    await send(Session(agent), "go")
    assert len(model.requests) == 2


def test_deprecated_flat_limits_fold_into_limits_once() -> None:
    with pytest.warns(DeprecationWarning):
        agent = Agent(model=ScriptedModel(["x"]), budget_usd=0.5, write_cancel_grace=2.0)
    assert agent.limits == Limits(budget_usd=0.5, write_cancel_grace=2.0)
    import dataclasses
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a replace() of a folded agent warns no more
        copy = dataclasses.replace(agent, name="copy")
    assert copy.limits == agent.limits


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"budget_usd": -1.0}, "budget_usd"),
        ({"write_cancel_grace": -0.1}, "write_cancel_grace"),
    ],
)
def test_bad_limits_are_config_errors(kwargs: dict[str, float], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Limits(**kwargs)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


def test_a_model_string_builds_the_model() -> None:
    agent = Agent(model="openai-compatible:http://127.0.0.1:9/v1#llama3.2")
    assert agent.resolved_model.name.endswith("llama3.2")
    assert agent.model is agent.resolved_model


def test_a_bad_model_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown model provider"):
        Agent(model="nope:model")


def test_context_options_group_the_pipeline_knobs() -> None:
    from mainspring import ContextOptions

    agent = Agent(model=ScriptedModel(["ok"]), context=ContextOptions(budget=1000, memory_k=3))
    assert agent.context.budget == 1000 and agent.context.memory_k == 3
    with pytest.raises(ConfigError, match="memory_k"):
        ContextOptions(memory_k=0)
    with pytest.raises(ConfigError, match="budget"):
        ContextOptions(budget=0)


def test_the_flat_context_fields_still_work_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="ContextOptions"):
        agent = Agent(model=ScriptedModel(["ok"]), context_budget=None, microcompact=False)
    assert agent.context.budget is None and agent.context.microcompact is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # folded once: a replace() warns no more
        again = dataclasses.replace(agent, name="copy")
    assert again.context == agent.context
