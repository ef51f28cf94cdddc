"""Model strings, labels and fallback chains."""

from __future__ import annotations

import pytest

from mainspring import Agent, ScriptedModel, ScriptedResponse, Session, TurnComplete
from mainspring.errors import (
    AuthenticationError,
    ConfigError,
    ModelError,
    Overloaded,
    RateLimited,
)
from mainspring.models.registry import (
    FallbackModel,
    ModelRegistry,
    missing_credentials,
    model_from_string,
)
from mainspring.models.routing import RoutedModel
from tests.helpers import collect

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("spec", ["gpt-5", "anthropic:", "nope:model", ":x"])
def test_malformed_or_unknown_model_strings_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError, match="provider"):
        model_from_string(spec)


def test_missing_credentials_say_exactly_what_is_missing() -> None:
    env: dict[str, str] = {}
    assert missing_credentials("anthropic:claude-sonnet-4-5", env) == (
        "anthropic:claude-sonnet-4-5 needs ANTHROPIC_API_KEY in the environment"
    )
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in str(missing_credentials("gemini:x", env))
    assert missing_credentials("gemini:x", {"GOOGLE_API_KEY": "k"}) is None
    assert missing_credentials("openai:gpt-5", {"OPENAI_API_KEY": "k"}) is None
    assert missing_credentials("openai-compatible:http://localhost:11434/v1#llama3.2", env) is None
    assert "base URL and a model" in str(missing_credentials("openai-compatible:llama3.2", env))


def test_building_without_a_key_fails_before_any_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        model_from_string("anthropic:claude-sonnet-4-5")


def failing(exc: ModelError, *, after: int = 0) -> ScriptedModel:
    return ScriptedModel([ScriptedResponse(text="partial words", error=exc, error_after=after)])


async def test_a_retryable_failure_moves_the_chain_on() -> None:
    busy = Overloaded("busy", provider="a", status=529, retryable=True)
    chain = FallbackModel([failing(busy), ScriptedModel(["from the backup"], name="backup")])
    session = Session(Agent(model=chain))
    events = await collect(session.send("hi"))
    assert isinstance(events[-1], TurnComplete)
    assert session.messages[-1].text == "from the backup"
    assert [name for name, _ in chain.failures] == ["scripted"]


async def test_no_fallback_after_output_or_for_errors_that_will_not_pass() -> None:
    limited = RateLimited("slow down", provider="a", retry_after=1.0)
    after_output = FallbackModel([failing(limited, after=1), ScriptedModel(["backup"])])
    events = await collect(Session(Agent(model=after_output)).send("hi"))
    assert events[-1].type == "error"  # text was already streamed: no silent restart
    denied = AuthenticationError("bad key", provider="a", status=401)
    chain = FallbackModel([failing(denied), ScriptedModel(["backup"])])
    events = await collect(Session(Agent(model=chain)).send("hi"))
    assert events[-1].type == "error" and "bad key" in events[-1].message


async def test_registry_labels() -> None:
    primary, flash = ScriptedModel(["p"], name="p"), ScriptedModel(["f"], name="f")
    registry = ModelRegistry({"primary": primary, "flash": flash})
    assert registry.get("primary") is primary and registry.labels == ["flash", "primary"]
    assert registry.fallback("primary", "flash").models == [primary, flash]
    with pytest.raises(ConfigError, match="no model labelled 'pro'"):
        registry.get("pro")
    registry.register("pro", "nope:x")
    with pytest.raises(ConfigError, match="unknown model provider"):
        registry.get("pro")


@pytest.mark.parametrize(
    ("spec", "env", "cls", "name"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "AnthropicModel", "claude-sonnet-4-5"),
        ("openai:gpt-5", "OPENAI_API_KEY", "OpenAIResponsesModel", "gpt-5"),
        ("openai-chat:gpt-4.1", "OPENAI_API_KEY", "OpenAIChatModel", "gpt-4.1"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY", "GeminiModel", "gemini-2.5-flash"),
        (
            "openai-compatible:http://127.0.0.1:11434/v1#llama3.2",
            None,
            "OpenAIChatModel",
            "llama3.2",
        ),
    ],
)
def test_model_strings_build_their_adapters_offline(
    spec: str, env: str | None, cls: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is not None:
        monkeypatch.setenv(env, "test-key")
    model = model_from_string(spec)
    assert type(model).__name__ == cls
    assert name in model.name


def test_route_true_gives_one_router_per_label_over_the_cheap_model() -> None:
    primary, flash = ScriptedModel(["p"], name="p"), ScriptedModel(["f"], name="f")
    registry = ModelRegistry({"primary": primary, "flash": flash})
    router = registry.get("primary", route=True)
    assert isinstance(router, RoutedModel)
    assert router.cheap is flash and router.expensive is primary
    assert registry.get("primary", route=True) is router  # stats accumulate
    with pytest.raises(ConfigError, match="cheap model"):
        ModelRegistry({"primary": primary}).get("primary", route=True)
