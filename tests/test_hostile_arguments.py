"""Hostile tool-call arguments become bounded error results; the turn goes on.

Deeply nested JSON (which exhausts a recursive parser), arguments over the
size limit, megabyte tool names and validation errors on huge values: each is
an ``is_error`` result the model sees, no longer than the engine's error
limit (never the input echoed back), and the next step runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import (
    Agent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolInputError,
    ToolResult,
    TurnComplete,
    tool,
)
from mainspring._run.arguments import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    _loads,
    parse_arguments,
)
from mainspring._run.results import ERROR_LIMIT
from tests.helpers import send
from tests.strategies import depths

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool(read_only=True)
def store(data: JsonValue) -> str:
    """Keep a value."""
    ran.append("store")
    return "kept"


@tool(max_result_chars=500)
def short(q: str) -> str:
    """A tool with a small result budget."""
    ran.append("short")
    return "ok"


def nested(depth: int) -> str:
    return '{"data": ' + "[" * depth + "]" * depth + "}"


HOSTILE = {
    "nested-100k": ("store", nested(100_000)),
    "nested-just-over": ("store", nested(MAX_ARGUMENT_DEPTH + 1)),
    "oversized": ("store", '{"data": "' + "x" * (MAX_ARGUMENT_CHARS + 1) + '"}'),
    "huge-invalid-value": ("short", '{"q": ' + "[" + "1," * 1_000_000 + "1]}"),
    "huge-tool-name": ("n" * 1_000_000, "{}"),
    "broken-json-megabytes": ("store", '{"data": "' + "y" * 2_000_000),
}


SLOW = {"oversized"}  # the scripted model streams 10 MiB in small deltas


@pytest.mark.parametrize("case", sorted(HOSTILE.keys() - SLOW))
async def test_hostile_arguments_are_a_bounded_error_result(case: str) -> None:
    await _hostile_arguments_are_a_bounded_error_result(case)


# The 10 MiB case goes through the same loop-independent code on either event loop (the
# deltas are joined, then the size is checked): asyncio always, trio nightly.
@pytest.mark.slow
@pytest.mark.parametrize(
    "anyio_backend", ["asyncio", pytest.param("trio", marks=pytest.mark.nightly)]
)
@pytest.mark.parametrize("case", sorted(SLOW))
async def test_oversized_arguments_are_a_bounded_error_result(case: str) -> None:
    await _hostile_arguments_are_a_bounded_error_result(case)


async def _hostile_arguments_are_a_bounded_error_result(case: str) -> None:
    name, raw = HOSTILE[case]
    ran.clear()
    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall(name, raw)]), "recovered"])
    session = Session(Agent(model=model, tools=[store, short]))
    events = await send(session, "go")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].is_error
    assert len(results[0].content) <= ERROR_LIMIT + 400  # the limit plus its truncation note
    assert ran == []
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert session.messages[-1].text == "recovered"  # the model saw the error and went on
    sent = model.requests[-1].messages[-1].tool_results_parts[0].content
    assert sent == results[0].content


async def test_nesting_at_the_limit_still_runs() -> None:
    ran.clear()
    raw = nested(MAX_ARGUMENT_DEPTH - 1)
    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("store", raw)]), "ok"])
    events = await send(Session(Agent(model=model, tools=[store])), "go")
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["kept"]
    assert ran == ["store"]


async def test_an_error_result_fits_a_small_result_budget() -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("short", '{"q": 5, "' + "z" * 9000 + '": 1}')]
            ),
            "",
        ]
    )
    events = await send(Session(Agent(model=model, tools=[short])), "go")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and len(result.content) <= 500 + 400


def _outcome(parse: Callable[[str], object], raw: str) -> object:
    try:
        return ("value", parse(raw))
    except RecursionError:
        return ("too deep",)
    except ValueError as exc:
        return ("error", str(exc))


JSONISH = st.text(alphabet=' \t\n\r{}[]",:0123456789.eE+-truefalsn\\u\ufeffx', max_size=40)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        JSONISH,
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
            ),
            max_leaves=8,
        ).map(json.dumps),
    ),
    st.sampled_from(["", " ", "\n", " x", "{}"]),
)
def test_the_argument_parser_reads_json_exactly_as_json_loads(body: str, tail: str) -> None:
    for raw in (body, body + tail, tail + body):
        assert _outcome(_loads, raw) == _outcome(json.loads, raw)


# -- growth: parsing and validating arguments costs time linear in their size ----------------


def _parse_and_validate(raw: str) -> None:
    """What a call's arguments go through: the parser, then the tool's validation."""
    parsed, error = parse_arguments("store", raw)
    if error is None:
        try:
            store.parse(parsed)
        except ToolInputError:
            pass


ARGUMENT_SHAPES: dict[str, Callable[[int], str]] = {
    "one-long-string": lambda n: json.dumps({"data": "x" * n}),
    "escaped-string": lambda n: json.dumps({"data": "\u00e9\n\\" * (n // 10)}),
    "numbers": lambda n: json.dumps({"data": list(range(n // 7))}),
    "small-objects": lambda n: json.dumps({"data": [{"k": i} for i in range(n // 10)]}),
    "brackets-at-the-depth-limit": lambda n: (
        '{"data": ' + "[" * MAX_ARGUMENT_DEPTH + "1," * (n // 2) + "1" + "]" * MAX_ARGUMENT_DEPTH
        + "}"
    ),
    "nested-past-the-limit": lambda n: nested(n // 2),
    "not-json": lambda n: "{" + '"a":' * (n // 4),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(ARGUMENT_SHAPES))
def test_arguments_parse_and_validate_in_time_linear_in_their_size(shape: str) -> None:
    from tests.growth import assert_linear

    assert_linear(_parse_and_validate, ARGUMENT_SHAPES[shape])


@pytest.mark.slow
@depths(quick=1, nightly=20)  # the named shapes above run always; random ones are depth
def test_any_repeated_argument_text_parses_in_linear_time(examples: int) -> None:
    from tests.growth import assert_linear

    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(unit=JSONISH.filter(bool))
    def check(unit: str) -> None:
        assert_linear(_parse_and_validate, lambda n: unit * max(1, n // len(unit)))

    check()
