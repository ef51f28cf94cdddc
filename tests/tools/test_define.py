"""Tests for ``@tool``, ``client_tool``, ToolPolicy and ToolContext."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Literal, cast

import pytest
from pydantic import BaseModel, JsonValue

from mainspring.errors import ConfigError, ToolInputError
from mainspring.events import Canvas, Event, ToolProgress
from mainspring.models.base import ToolSpec
from mainspring.tools import (
    Permission,
    ToolContext,
    ToolOutput,
    ToolPolicy,
    UsdAmount,
    client_tool,
    tool,
    usd,
)
from mainspring.tools.policy import (
    DEFAULT_MAX_RESULT_CHARS,
    ToolInput,
    resolve_permission,
    run_preflight,
)


class Forecast(BaseModel):
    city: str
    high: float


class Payment(BaseModel):
    to: str
    amount_usd: float
    memo: str = ""


def make_ctx(
    emit: Callable[[Event], None], *, tool_name: str = "t", tool_use_id: str = "tu_1"
) -> ToolContext:
    return ToolContext(
        session_id="s1",
        agent_name="agent",
        tool_use_id=tool_use_id,
        tool_name=tool_name,
        turn_index=0,
        cache={},
        emit=emit,
    )


def amount_of(args: ToolInput) -> float | None:
    value = args.get("amount_usd")
    return float(value) if isinstance(value, int | float) else None


@tool
def get_weather(ctx: ToolContext, city: str, days: int = 3, units: Literal["c", "f"] = "c") -> str:
    """Weather forecast for a city.

    Uses the public forecast service.

    Args:
        city: The city name.
        days: How many days to forecast.
        ctx: The run context.
    """
    return f"{city}:{days}:{units}:{ctx.tool_use_id}"


@tool(name="add_items", read_only=True, timeout=5.0)
async def add(items: list[int], scale: float = 1.0) -> float:
    """Sum a list of integers."""
    return sum(items) * scale


# --- schema and description ------------------------------------------------------------


def test_schema_from_signature_hides_context_and_forbids_extras() -> None:
    assert get_weather.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "days": {"type": "integer", "default": 3, "description": "How many days to forecast."},
            "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
        },
        "required": ["city"],
    }
    assert get_weather.ctx_param == "ctx"


def test_description_from_docstring_without_args_section() -> None:
    assert get_weather.description == (
        "Weather forecast for a city.\n\nUses the public forecast service."
    )
    assert "Args" not in get_weather.description


def test_bare_decorator_defaults() -> None:
    assert get_weather.name == "get_weather"
    assert get_weather.is_async is False
    assert get_weather.client_executed is False
    assert get_weather.policy == ToolPolicy()
    assert get_weather.policy.permission == "auto"
    assert get_weather.policy.max_result_chars == DEFAULT_MAX_RESULT_CHARS


def test_decorator_with_options() -> None:
    assert add.name == "add_items"
    assert add.is_async is True
    assert add.ctx_param is None
    assert add.policy.read_only is True
    assert add.policy.timeout == 5.0
    assert add.input_schema["required"] == ["items"]
    assert add.input_schema["properties"] == {
        "items": {"type": "array", "items": {"type": "integer"}},
        "scale": {"type": "number", "default": 1.0},
    }


def test_all_options_land_in_policy() -> None:
    def check(args: ToolInput) -> str | None:
        return None

    @tool(
        permission="confirm",
        flags={"mutating", "external"},
        max_result_chars=100,
        preflight=check,
        modifiable_fields=["memo"],
        concurrency_safe=False,
    )
    def send(to: str, memo: str = "") -> str:
        """Send a note."""
        return to

    assert send.policy == ToolPolicy(
        read_only=False,
        concurrency_safe=False,
        permission="confirm",
        flags=frozenset({"mutating", "external"}),
        max_result_chars=100,
        preflight=check,
        modifiable_fields=("memo",),
        timeout=None,
    )


def test_explicit_description_overrides_docstring() -> None:
    @tool(description="Explicit.")
    def f(x: int) -> int:
        """Docstring."""
        return x

    assert f.description == "Explicit."


def test_explicit_description_allows_missing_docstring() -> None:
    @tool(description="Ping the server.")
    def ping() -> str:
        return "pong"

    assert ping.description == "Ping the server."
    assert ping.input_schema["properties"] == {}
    assert "required" not in ping.input_schema


def test_spec_and_renamed() -> None:
    assert get_weather.spec == ToolSpec(
        name="get_weather",
        description=get_weather.description,
        input_schema=get_weather.input_schema,
    )
    copy = get_weather.renamed("weather")
    assert copy.name == "weather"
    assert copy.input_schema == get_weather.input_schema
    assert get_weather.name == "get_weather"


# --- definition errors -------------------------------------------------------------------


def test_missing_annotation_is_config_error() -> None:
    def f(x, y: int) -> int:  # type: ignore[no-untyped-def]  # the point of the test
        """Doc."""
        return y

    with pytest.raises(ConfigError, match=r"'x' needs a type annotation"):
        tool(f)


def test_var_args_is_config_error() -> None:
    def f(*args: int) -> int:
        """Doc."""
        return 0

    with pytest.raises(ConfigError, match=r"\*args and \*\*kwargs"):
        tool(f)


def test_var_kwargs_is_config_error() -> None:
    def f(x: int, **kwargs: int) -> int:
        """Doc."""
        return x

    with pytest.raises(ConfigError, match=r"\*args and \*\*kwargs"):
        tool(f)


def test_unresolvable_annotation_is_config_error() -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    f.__annotations__ = {"x": "NoSuchType"}
    with pytest.raises(ConfigError, match="cannot resolve annotation"):
        tool(f)


def test_no_docstring_is_config_error() -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(ConfigError, match="needs a description"):
        tool(f)


@pytest.mark.parametrize(
    "name",
    ["has space", "dot.name", "slash/name", "x" * 65, "ok\n", "émoji"],
)
def test_bad_names_are_config_errors(name: str) -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    with pytest.raises(ConfigError, match="tool name"):
        tool(name=name)(f)


@pytest.mark.parametrize("name", ["a", "get-balance_2", "x" * 64])
def test_good_names_accepted(name: str) -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    assert tool(name=name)(f).name == name


@pytest.mark.parametrize("name", ["", "bad name", "x" * 65, "trailing\n"])
def test_renamed_checks_name(name: str) -> None:
    with pytest.raises(ConfigError, match="tool name"):
        get_weather.renamed(name)


def test_modifiable_fields_must_be_inputs() -> None:
    def f(to: str, memo: str = "") -> str:
        """Doc."""
        return to

    with pytest.raises(ConfigError, match=r"modifiable_fields not in its input: \['amount'\]"):
        tool(modifiable_fields=("memo", "amount"))(f)


def test_context_parameter_is_not_modifiable() -> None:
    def f(to: str, ctx: ToolContext) -> str:
        """Doc."""
        return to

    with pytest.raises(ConfigError, match=r"modifiable_fields not in its input: \['ctx'\]"):
        tool(modifiable_fields=("ctx",))(f)


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_non_positive_timeout_is_config_error(timeout: float) -> None:
    with pytest.raises(ConfigError, match="timeout must be positive"):
        tool(timeout=timeout)


def test_max_result_chars_below_one_is_config_error() -> None:
    with pytest.raises(ConfigError, match="max_result_chars"):
        tool(max_result_chars=0)


def test_decorating_a_non_function_is_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a function"):
        tool()(cast(Any, 42))


# --- validate ------------------------------------------------------------------------------


def test_validate_fills_defaults_and_returns_json() -> None:
    assert get_weather.validate({"city": "Oslo"}) == {"city": "Oslo", "days": 3, "units": "c"}
    assert add.validate({"items": [1, 2]}) == {"items": [1, 2], "scale": 1.0}


def test_validate_result_is_canonical_json() -> None:
    out = add.validate({"items": [1], "scale": 2})
    assert out == {"items": [1], "scale": 2.0}
    assert isinstance(out["scale"], float)
    assert json.loads(json.dumps(out)) == out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({}, "city"),
        ({"city": 5}, "city"),
        ({"city": "Oslo", "days": "soon"}, "days"),
        ({"city": "Oslo", "units": "kelvin"}, "units"),
        ({"city": "Oslo", "bogus": 1}, "bogus"),
        ({"city": "Oslo", "ctx": "x"}, "ctx"),
    ],
)
def test_validate_invalid_names_tool_and_field(args: dict[str, JsonValue], field: str) -> None:
    with pytest.raises(ToolInputError) as info:
        get_weather.validate(args)
    assert info.value.field == field
    assert info.value.tool == "get_weather"
    assert "'get_weather'" in str(info.value)
    assert field in str(info.value)


def test_validate_nested_field_is_dotted_path() -> None:
    with pytest.raises(ToolInputError) as info:
        add.validate({"items": [1, "two"]})
    assert info.value.field == "items.1"


@pytest.mark.parametrize("args", [[1, 2], "city=Oslo", None, 3])
def test_validate_rejects_non_dict(args: object) -> None:
    with pytest.raises(ToolInputError, match="must be a JSON object") as info:
        get_weather.validate(args)
    assert info.value.field == ""
    assert info.value.tool == "get_weather"


# --- call --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_call_runs_in_worker_thread_and_gets_context() -> None:
    seen: list[ToolContext] = []
    threads: list[int] = []

    @tool
    def where(x: int, ctx: ToolContext) -> str:
        """Report."""
        threads.append(threading.get_ident())
        seen.append(ctx)
        return str(x * 2)

    ctx = make_ctx(lambda e: None)
    out = await where.call(where.validate({"x": 21}), ctx)
    assert out == ToolOutput(content="42")
    assert seen == [ctx]
    assert threads != [threading.get_ident()]


@pytest.mark.anyio
async def test_progress_from_worker_thread_is_emitted_on_loop_thread() -> None:
    events: list[Event] = []
    emit_threads: list[int] = []

    def emit(event: Event) -> None:
        emit_threads.append(threading.get_ident())
        events.append(event)

    @tool
    def count(n: int, ctx: ToolContext) -> str:
        """Count up."""
        for i in range(n):
            ctx.progress(f"step {i}", pct=100 * (i + 1) / n)
        return "done"

    loop_thread = threading.get_ident()
    ctx = make_ctx(emit, tool_name="count", tool_use_id="tu_9")
    out = await count.call({"n": 2}, ctx)
    assert out.content == "done"
    assert events == [
        ToolProgress(tool_use_id="tu_9", name="count", message="step 0", pct=50.0),
        ToolProgress(tool_use_id="tu_9", name="count", message="step 1", pct=100.0),
    ]
    assert emit_threads == [loop_thread, loop_thread]


@pytest.mark.anyio
async def test_async_call_with_context_progress_and_canvas() -> None:
    events: list[Event] = []

    @tool
    async def chart(title: str, ctx: ToolContext) -> None:
        """Draw a chart."""
        ctx.progress("drawing")
        ctx.canvas("chart", {"points": [1, 2]}, title=title)
        ctx.cache["drawn"] = title

    ctx = make_ctx(events.append, tool_name="chart", tool_use_id="tu_2")
    out = await chart.call(chart.validate({"title": "Sales"}), ctx)
    assert out == ToolOutput(content="")
    assert events == [
        ToolProgress(tool_use_id="tu_2", name="chart", message="drawing", pct=None),
        Canvas(kind="chart", data={"points": [1, 2]}, title="Sales", tool_use_id="tu_2"),
    ]
    assert ctx.cache == {"drawn": "Sales"}
    assert ctx.cancelled is False


@pytest.mark.anyio
async def test_async_call_without_context() -> None:
    out = await add.call(add.validate({"items": [1, 2, 3], "scale": 0.5}), make_ctx(lambda e: None))
    assert out == ToolOutput(content="3.0")


@pytest.mark.anyio
async def test_call_receives_validated_python_values() -> None:
    received: list[object] = []

    @tool
    async def pay(payment: Payment) -> str:
        """Pay."""
        received.append(payment)
        return "ok"

    args = pay.validate({"payment": {"to": "bob", "amount_usd": 5}})
    assert args == {"payment": {"to": "bob", "amount_usd": 5.0, "memo": ""}}
    await pay.call(args, make_ctx(lambda e: None))
    assert received == [Payment(to="bob", amount_usd=5.0)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", ToolOutput(content="plain")),
        (None, ToolOutput(content="")),
        ({"city": "Zürich", "n": 1}, ToolOutput(content='{"city": "Zürich", "n": 1}')),
        ([1, "a"], ToolOutput(content='[1, "a"]')),
        (7, ToolOutput(content="7")),
        (Forecast(city="Oslo", high=3.5), ToolOutput(content='{"city":"Oslo","high":3.5}')),
        (ToolOutput(content="boom", is_error=True), ToolOutput(content="boom", is_error=True)),
    ],
)
async def test_return_values_are_converted(value: object, expected: ToolOutput) -> None:
    @tool
    def sync_give() -> object:
        """Give."""
        return value

    @tool
    async def async_give() -> object:
        """Give."""
        return value

    ctx = make_ctx(lambda e: None)
    assert await sync_give.call({}, ctx) == expected
    assert await async_give.call({}, ctx) == expected


@pytest.mark.anyio
async def test_tool_exceptions_propagate() -> None:
    @tool
    def broken() -> str:
        """Fail."""
        raise RuntimeError("kaput")

    with pytest.raises(RuntimeError, match="kaput"):
        await broken.call({}, make_ctx(lambda e: None))


# --- client tools --------------------------------------------------------------------------


PAY_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "amount": {"type": "number"},
        "items": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["to"],
    "additionalProperties": False,
}


def test_client_tool_from_model() -> None:
    t = client_tool(
        "sign_payment",
        description="Sign in the browser.",
        input_schema=Payment,
        modifiable_fields=["memo"],
        flags={"irreversible"},
    )
    assert t.client_executed is True
    assert t.fn is None
    assert t.policy.permission == "confirm"
    assert t.policy.read_only is False
    assert t.policy.modifiable_fields == ("memo",)
    assert t.policy.flags == frozenset({"irreversible"})
    assert t.input_schema == {
        "type": "object",
        "properties": {
            "to": {"type": "string"},
            "amount_usd": {"type": "number"},
            "memo": {"type": "string", "default": ""},
        },
        "required": ["to", "amount_usd"],
    }
    assert t.validate({"to": "bob", "amount_usd": 2}) == {
        "to": "bob",
        "amount_usd": 2.0,
        "memo": "",
    }
    with pytest.raises(ToolInputError) as info:
        t.validate({"to": "bob", "amount_usd": "lots"})
    assert info.value.field == "amount_usd"
    assert "'sign_payment'" in str(info.value)


def test_client_tool_from_json_schema() -> None:
    t = client_tool("pay", description="Pay.", input_schema=PAY_SCHEMA)
    assert t.client_executed is True
    assert t.policy.permission == "confirm"
    assert t.input_schema == PAY_SCHEMA
    assert t.input_model is None
    assert t.validate({"to": "bob", "amount": 1.5}) == {"to": "bob", "amount": 1.5}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"to": "bob", "amount": "lots"}, "amount"),
        ({"to": 3}, "to"),
        ({"to": "bob", "items": [1, "two"]}, "items.1"),
    ],
)
def test_client_tool_json_schema_errors_name_field(args: dict[str, JsonValue], field: str) -> None:
    t = client_tool("pay", description="Pay.", input_schema=PAY_SCHEMA)
    with pytest.raises(ToolInputError) as info:
        t.validate(args)
    assert info.value.field == field
    assert info.value.tool == "pay"
    assert "'pay'" in str(info.value)
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"amount": 1}, "to"),
        ({"to": "bob", "zz": 1}, "zz"),
    ],
)
def test_client_tool_json_schema_field_matches_model_path(
    args: dict[str, JsonValue], field: str
) -> None:
    # A missing or unexpected property is as much "the offending field" as a
    # mistyped one, and the pydantic path reports it as such.
    t = client_tool("pay", description="Pay.", input_schema=PAY_SCHEMA)
    with pytest.raises(ToolInputError) as info:
        t.validate(args)
    assert field in str(info.value)
    assert info.value.field == field


def test_client_tool_json_schema_rejects_non_dict() -> None:
    t = client_tool("pay", description="Pay.", input_schema=PAY_SCHEMA)
    with pytest.raises(ToolInputError, match="must be a JSON object"):
        t.validate(["bob"])


@pytest.mark.parametrize("kind", ["array", "string"])
def test_client_tool_non_object_schema_is_config_error(kind: str) -> None:
    with pytest.raises(ConfigError, match="must describe an object"):
        client_tool("pay", description="Pay.", input_schema={"type": kind})


def test_client_tool_bad_name_is_config_error() -> None:
    with pytest.raises(ConfigError, match="tool name"):
        client_tool("pay now", description="Pay.", input_schema=PAY_SCHEMA)


@pytest.mark.anyio
async def test_client_tool_has_no_body_to_call() -> None:
    t = client_tool("pay", description="Pay.", input_schema=PAY_SCHEMA)
    with pytest.raises(ConfigError, match="client-executed"):
        await t.call({"to": "bob"}, make_ctx(lambda e: None))


# --- policy ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read_only", "concurrency_safe", "parallel"),
    [
        (True, None, True),
        (True, True, True),
        (True, False, False),
        (False, None, False),
        (False, True, False),
        (False, False, False),
    ],
)
def test_policy_parallel(read_only: bool, concurrency_safe: bool | None, parallel: bool) -> None:
    policy = ToolPolicy(read_only=read_only, concurrency_safe=concurrency_safe)
    assert policy.parallel is parallel
    assert policy.is_write is (not read_only)


def test_decorator_policy_parallel() -> None:
    assert add.policy.parallel is True
    assert get_weather.policy.parallel is False


def test_usd_wraps_amount_function() -> None:
    perm = usd(amount_of)
    assert isinstance(perm, UsdAmount)
    assert perm.amount({"amount_usd": 12}) == 12.0


def test_resolve_static_permissions() -> None:
    assert resolve_permission(ToolPolicy(), {}) == ("auto", None)
    assert resolve_permission(ToolPolicy(permission="confirm"), {}) == ("confirm", None)


def test_resolve_resolver_permission_sees_input() -> None:
    seen: list[ToolInput] = []

    def resolver(args: ToolInput) -> Permission:
        seen.append(args)
        return "confirm" if args.get("path") == "/" else "auto"

    policy = ToolPolicy(permission=resolver)
    assert resolve_permission(policy, {"path": "/"}) == ("confirm", None)
    assert resolve_permission(policy, {"path": "/tmp"}) == ("auto", None)
    assert seen == [{"path": "/"}, {"path": "/tmp"}]


def test_resolve_usd_permission_defers_with_amount() -> None:
    policy = ToolPolicy(permission=usd(amount_of))
    assert resolve_permission(policy, {"amount_usd": 250}) == (None, 250.0)
    assert resolve_permission(policy, {}) == (None, None)


def test_usd_permission_through_decorator() -> None:
    @tool(permission=usd(amount_of))
    def send(to: str, amount_usd: float) -> str:
        """Send money."""
        return to

    assert resolve_permission(send.policy, send.validate({"to": "a", "amount_usd": 3})) == (
        None,
        3.0,
    )


@pytest.mark.anyio
async def test_run_preflight_none() -> None:
    assert await run_preflight(ToolPolicy(), {"x": 1}) is None


@pytest.mark.anyio
async def test_run_preflight_sync() -> None:
    def check(args: ToolInput) -> str | None:
        return "balance too low" if args["x"] == 0 else None

    policy = ToolPolicy(preflight=check)
    assert await run_preflight(policy, {"x": 0}) == "balance too low"
    assert await run_preflight(policy, {"x": 1}) is None


@pytest.mark.anyio
async def test_run_preflight_async() -> None:
    async def check(args: ToolInput) -> str | None:
        return "market closed" if args["x"] == 0 else None

    policy = ToolPolicy(preflight=check)
    assert await run_preflight(policy, {"x": 0}) == "market closed"
    assert await run_preflight(policy, {"x": 1}) is None


def test_client_tool_with_a_malformed_schema_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid input schema"):
        client_tool(
            "broken",
            description="Bad schema.",
            input_schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}},
        )


@pytest.mark.parametrize("bad", ["Confirm", "AUTO", "ask", "deny", ""])
def test_unknown_permission_strings_fail_at_definition(bad: str) -> None:
    with pytest.raises(ConfigError, match="'auto', 'confirm'") as info:

        @tool(permission=cast(Permission, bad))  # the mistake under test
        def act() -> str:
            """Does something."""
            return "x"

    assert repr(bad) in str(info.value)
    with pytest.raises(ConfigError, match="not a tier"):
        ToolPolicy(permission=cast(Permission, bad))


def test_known_permissions_still_define() -> None:
    good: tuple[Permission, ...] = ("auto", "confirm")
    for tier in good:
        assert ToolPolicy(permission=tier).permission == tier
    assert callable(ToolPolicy(permission=lambda args: "auto").permission)
    assert isinstance(ToolPolicy(permission=usd(lambda args: 1.0)).permission, UsdAmount)
