"""Typed output: an agent's answer as a validated object, not only text.

```python
class Report(BaseModel):
    city: str
    population: int

agent = Agent(model=..., output_type=Report)
result = await Session(agent).run("Largest city in Mexico?")
report = result.output_as(Report)
```

``Agent(output_type=…)`` takes anything pydantic's ``TypeAdapter`` takes: a
pydantic model, a ``TypedDict``, a dataclass, a union of those, a list, a
scalar; ``str`` (the default) keeps plain text. :class:`OutputSpec` holds the
one ``TypeAdapter``: its JSON schema is what the model is asked for, and it
validates what the model answered. How it is asked for depends on the model
(its ``native_output`` flag, see :func:`native_output`):

- **native**: the schema goes in ``ModelSettings.output_schema`` (OpenAI's
  ``response_format`` / ``text.format``, Gemini's ``response_json_schema``,
  Anthropic's ``output_config.format``); the final answer's text is the JSON.
  The agent's tools are still offered: every one of those APIs lets the model
  call tools and constrains only the message that answers.
- **tool**: the model is given one more tool, :data:`FINAL_RESULT_TOOL`, whose
  arguments are the answer; the turn ends when it calls that tool alone.

A schema whose root is not an object (a union, a list, a scalar) is wrapped
as ``{"response": …}`` on both paths (providers want an object at the root).
An answer that does not validate, or that an output validator rejects with
:class:`~mainspring.errors.OutputRejected`, goes back to the model with the
reason, ``Agent.output_retries`` times at most; then the run ends with an
``error`` event (``code="output_invalid"``), which ``Session.run`` raises as
:class:`~mainspring.errors.OutputInvalid`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.models.base import ToolSpec

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

    from mainspring.models.base import Model

__all__ = [
    "FINAL_RESULT_TOOL",
    "OutputContext",
    "OutputSpec",
    "OutputValidator",
    "feedback",
    "native_output",
]

T = TypeVar("T")

FINAL_RESULT_TOOL = "final_result"
"""The tool a model without native structured output answers through."""

_WRAP_KEY = "response"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputContext:
    """What an output validator is told besides the output."""

    session_id: str
    principal: str | None = None
    """Who owns the session (``SessionState.principal``; ``None`` for a local session)."""
    turn_index: int = 0
    retries: int = 0
    """Answers of this turn already sent back to the model."""


OutputValidator: TypeAlias = Callable[[Any, OutputContext], "Awaitable[None] | None"]
"""``fn(output, context)``, sync or async: raise :class:`~mainspring.errors.OutputRejected`
to send the model back (``Any``: each validator takes the agent's own output type)."""


def native_output(model: Model, *, tools: bool) -> bool:
    """Whether ``model`` is asked for a typed output as a JSON schema (else: the tool).

    Its ``native_output`` attribute says: ``True``; ``"without_tools"``, only
    when the agent offers no tools (Gemini before 3); ``False`` or no
    attribute (a wrapper such as a fallback or a routed model, a model of
    your own): through :data:`FINAL_RESULT_TOOL`, which every tool-calling
    model can do.
    """
    flag = getattr(model, "native_output", False)
    return flag is True or (flag == "without_tools" and not tools)


class OutputSpec:
    """An output type's schema, validation and JSON form (one ``TypeAdapter``).

    Built by :class:`~mainspring.agent.Agent` for an ``output_type`` other than
    ``str``; pydantic loads here, with the first typed agent.
    """

    __slots__ = (
        "_adapter",
        "_from_json",
        "_wire",
        "invalid",
        "output_type",
        "schema",
        "wrapped",
    )

    def __init__(self, output_type: Any) -> None:
        """Build the adapters for ``output_type`` (anything ``TypeAdapter`` takes).

        Raises:
            ConfigError: pydantic cannot build a schema for it.
        """
        from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError
        from pydantic.errors import PydanticUserError
        from pydantic_core import from_json

        from mainspring.errors import ConfigError

        self.output_type = output_type
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
            self.wrapped = schema.get("type") != "object"
            wire = TypeAdapter(_wrapper(output_type)) if self.wrapped else adapter
            schema = wire.json_schema() if self.wrapped else schema
        except (PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise ConfigError(f"output_type {output_type!r} has no JSON schema: {exc}") from exc
        self._adapter = adapter
        self._wire = wire
        self._from_json = from_json
        self.invalid: type[ValidationError] = ValidationError
        """What :meth:`validate` raises for an answer that is not valid."""
        self.schema: dict[str, JsonValue] = cast("dict[str, JsonValue]", schema)
        """The JSON schema the model is asked to answer with (wrapped when not an object)."""
        if self.wrapped:
            self.schema["title"] = _title(output_type)

    def tool_spec(self) -> ToolSpec:
        """The final-answer tool: its arguments are the answer."""
        return ToolSpec(
            name=FINAL_RESULT_TOOL,
            description=(
                "Give your final answer by calling this tool, alone, once you have "
                "everything you need. Its arguments are the answer."
            ),
            input_schema=self.schema,
        )

    def validate(self, text: str) -> object:
        """The output in ``text`` (the answer's JSON, or the tool's arguments).

        Raises:
            pydantic.ValidationError: Not JSON, or not valid for the type.
        """
        value = self._wire.validate_json(text)
        return value[_WRAP_KEY] if self.wrapped else value

    def dump(self, value: object) -> JsonValue:
        """``value`` as JSON data (what ``final_output`` events carry)."""
        return cast("JsonValue", self._adapter.dump_python(value, mode="json"))

    def revive(self, data: JsonValue) -> object:
        """An instance again from :meth:`dump`'s JSON data (validated as JSON)."""
        from pydantic_core import to_json

        return self._adapter.validate_json(to_json(data))

    def partial(self, text: str) -> JsonValue | None:
        """Best effort: the JSON value so far of an answer still streaming (``None``: none yet).

        Parsed with pydantic-core's partial JSON mode (an unfinished string
        is kept as far as it goes); not validated.
        """
        try:
            value = self._from_json(text, allow_partial="trailing-strings")
        except ValueError:
            return None
        if self.wrapped:
            return cast("JsonValue", value.get(_WRAP_KEY)) if isinstance(value, dict) else None
        return cast("JsonValue", value)


def feedback(exc: ValidationError, *, wrapped: bool) -> str:
    """What the model is told about an answer that did not validate (one line per error)."""
    lines = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        loc = [str(p) for p in error["loc"]]
        if wrapped and loc[:1] == [_WRAP_KEY]:
            loc = loc[1:]
        lines.append(f"- {'.'.join(loc) or '(root)'}: {error['msg']}")
    return "\n".join(lines) or str(exc)


def _wrapper(output_type: Any) -> Any:
    from typing_extensions import TypedDict

    return TypedDict("Output", {_WRAP_KEY: output_type})  # type: ignore[operator]  # the functional form with a runtime type


def _title(output_type: Any) -> str:
    name = getattr(output_type, "__name__", None)
    return name if isinstance(name, str) and name else "Output"
