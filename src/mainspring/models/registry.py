"""Models by label and by model string, and fallback chains.

Model strings name a provider and a model:

- ``anthropic:claude-sonnet-4-5``: Anthropic Messages (``ANTHROPIC_API_KEY``)
- ``openai:gpt-5``: OpenAI Responses (``OPENAI_API_KEY``)
- ``openai-chat:gpt-4.1``: OpenAI Chat Completions (``OPENAI_API_KEY``)
- ``gemini:gemini-2.5-flash``: Gemini (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)
- ``openai-compatible:http://localhost:11434/v1#llama3.2``: any OpenAI-compatible server
- ``mock`` (or ``mock:<name>``): :class:`~mainspring.models.mock.MockModel`, offline,
  no script and no key: any agent runs with it

Adapters are imported on first use, so a missing extra or key is reported
only for the provider actually asked for, with the exact fix.

```python
models = ModelRegistry({
    "primary": "anthropic:claude-sonnet-4-5",
    "flash": "gemini:gemini-2.5-flash",
})
agent = Agent(model=models.get("primary"), ...)
agent = Agent(model=models.fallback("primary", "flash"), ...)  # next on a retryable failure
```
"""

from __future__ import annotations

import importlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from mainspring.errors import ConfigError, ModelError
from mainspring.models.base import Model, ModelEvent, ModelRequest
from mainspring.models.routing import RoutedModel

__all__ = ["FallbackModel", "ModelRegistry", "missing_credentials", "model_from_string"]

# prefix -> (module, class, environment variables holding a key (any one), extra)
_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "anthropic": (
        "mainspring.models.anthropic",
        "AnthropicModel",
        ("ANTHROPIC_API_KEY",),
        "anthropic",
    ),
    "openai": (
        "mainspring.models.openai_responses",
        "OpenAIResponsesModel",
        ("OPENAI_API_KEY",),
        "openai",
    ),
    "openai-chat": ("mainspring.models.openai", "OpenAIChatModel", ("OPENAI_API_KEY",), "openai"),
    "gemini": (
        "mainspring.models.gemini",
        "GeminiModel",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "gemini",
    ),
    "openai-compatible": ("mainspring.models.openai", "OpenAIChatModel", (), "openai"),
    "mock": ("mainspring.models.mock", "MockModel", (), ""),
}
_MOCK = "mock"
"""The offline scriptless model's provider (and its whole string: ``"mock"``)."""


def _split(spec: str) -> tuple[str, str]:
    if spec == _MOCK:
        return _MOCK, _MOCK
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ConfigError(
            f"model string {spec!r} must look like 'provider:model' with provider one of "
            f"{sorted(_PROVIDERS)} (e.g. 'anthropic:claude-sonnet-4-5')"
        )
    if provider not in _PROVIDERS:
        raise ConfigError(
            f"unknown model provider {provider!r} in {spec!r}; use one of {sorted(_PROVIDERS)}"
        )
    return provider, rest


def missing_credentials(spec: str, env: Mapping[str, str] | None = None) -> str | None:
    """What is missing to use ``spec`` (an environment variable, a URL), or ``None``."""
    provider, rest = _split(spec)
    env = os.environ if env is None else env
    if provider == _MOCK:
        return None
    if provider == "openai-compatible":
        base, sep, model = rest.partition("#")
        if not sep or not model or not base.startswith(("http://", "https://")):
            return (
                "an OpenAI-compatible model string needs a base URL and a model: "
                "'openai-compatible:http://localhost:11434/v1#llama3.2'"
            )
        return None
    keys = _PROVIDERS[provider][2]
    if not any(env.get(k) for k in keys):
        return f"{spec} needs {' or '.join(keys)} in the environment"
    return None


def model_from_string(spec: str, **options: Any) -> Model:
    """Build the adapter a model string names (options go to its constructor).

    Raises:
        ConfigError: An unknown provider, a malformed string, or a missing key.
        ImportError: The provider's extra is not installed (naming the pip command).
    """
    provider, rest = _split(spec)
    module_name, class_name, keys, extra = _PROVIDERS[provider]
    if provider == _MOCK:
        from mainspring.models.mock import MockModel

        return MockModel(name=rest, **options)
    if "api_key" not in options and "client" not in options and "http_client" not in options:
        problem = missing_credentials(spec)
        if problem is not None:
            raise ConfigError(problem)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f'{spec} needs: pip install "mainspring[{extra}]"') from exc
    cls = getattr(module, class_name)
    if provider == "openai-compatible":
        base_url, _, model = rest.partition("#")
        options.setdefault("base_url", base_url)
        options.setdefault("api_key", os.environ.get("OPENAI_COMPATIBLE_API_KEY", "not-needed"))
        options.setdefault("provider", "openai-compatible")
        rest = model
    elif keys and "api_key" not in options and "client" not in options:
        options["api_key"] = next(os.environ[k] for k in keys if os.environ.get(k))
    model_obj: Model = cls(rest, **options)
    return model_obj


class FallbackModel:
    """Tries each model in turn: a retryable failure before any output moves to the next."""

    def __init__(self, models: Sequence[Model]) -> None:
        """Create a chain; the first model is tried first."""
        if not models:
            raise ConfigError("a fallback chain needs at least one model")
        self.models = list(models)
        self.failures: list[tuple[str, ModelError]] = []
        """(model name, error) of every failure that moved the chain on."""

    @property
    def name(self) -> str:
        """The first model's name (usage is reported under the model that answered)."""
        return self.models[0].name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream from the first model that answers."""
        for i, model in enumerate(self.models):
            started = False
            try:
                async for event in model.stream(request):
                    started = True
                    yield event
                return
            except ModelError as exc:
                if started or not exc.retryable or i == len(self.models) - 1:
                    raise
                self.failures.append((model.name, exc))


class ModelRegistry:
    """Models registered under labels (``primary``, ``pro``, ``flash``, ``lite``…)."""

    def __init__(
        self, models: Mapping[str, Model | str] | None = None, *, cheap: str | None = None
    ) -> None:
        """Register ``label -> model`` (a Model, or a model string built on first use).

        Args:
            models: The labelled models.
            cheap: The label ``get(..., route=True)`` routes easy turns to
                (defaults to ``lite``, then ``flash``, when registered).
        """
        self._specs: dict[str, Model | str] = dict(models or {})
        self._built: dict[str, Model] = {}
        self._cheap = cheap
        self._routers: dict[str, RoutedModel] = {}

    def register(self, label: str, model: Model | str) -> None:
        """Add or replace a label."""
        self._specs[label] = model
        self._built.pop(label, None)

    def get(self, label_or_spec: str, *, route: bool = False) -> Model:
        """The model registered under a label, or built from a model string.

        With ``route=True``, a cost router between the cheap label and this
        model (one router per label, so its stats accumulate).
        """
        if route:
            router = self._routers.get(label_or_spec)
            if router is None:
                router = self.routed(self._cheap_label(), label_or_spec)
                self._routers[label_or_spec] = router
            return router
        if label_or_spec in self._built:
            return self._built[label_or_spec]
        spec = self._specs.get(label_or_spec)
        if spec is None:
            if ":" not in label_or_spec:
                raise ConfigError(
                    f"no model labelled {label_or_spec!r}; labels: {sorted(self._specs)}"
                )
            spec = label_or_spec
        model = model_from_string(spec) if isinstance(spec, str) else spec
        self._built[label_or_spec] = model
        return model

    def _cheap_label(self) -> str:
        if self._cheap is not None:
            return self._cheap
        for label in ("lite", "flash"):
            if label in self._specs:
                return label
        raise ConfigError(
            "route=True needs a cheap model: register 'lite' or 'flash', or pass cheap="
        )

    def routed(self, cheap: str, expensive: str, *, judge: bool = True) -> RoutedModel:
        """A cost router between two labelled models (see :class:`RoutedModel`)."""
        return RoutedModel(self.get(cheap), self.get(expensive), judge=judge)

    def fallback(self, *labels: str) -> FallbackModel:
        """A chain over the labelled models, in order."""
        return FallbackModel([self.get(label) for label in labels])

    @property
    def labels(self) -> list[str]:
        """Every registered label."""
        return sorted(self._specs)
