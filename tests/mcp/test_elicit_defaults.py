"""SEP-1034: an accepted elicitation gets the form's defaults for the fields it omits."""

from __future__ import annotations

from typing import Any, cast

import mcp.types as mcp_types
import pytest
from pydantic import JsonValue

from mainspring.mcp import ElicitAnswer, McpElicitation
from mainspring.mcp._requests import elicitation_callback, with_defaults

pytestmark = pytest.mark.anyio

FORM: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["a", "b"]},
        "plan": {
            "type": "string",
            "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}],
            "default": "pro",
        },
        "nick": {"type": "string"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_omitted_fields_take_their_defaults_and_given_ones_stay() -> None:
    filled = with_defaults(FORM, {"name": "Ada", "verified": False})
    assert filled == {
        "name": "Ada",
        "verified": False,
        "age": 30,
        "score": 95.5,
        "status": "active",
        "tags": ["a", "b"],
        "plan": "pro",
    }, "no default for nick: it stays omitted"


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer", "default": "30"},
        {"type": "integer", "default": True},
        {"type": "integer", "default": 1.5},
        {"type": "number", "default": False},
        {"type": "boolean", "default": "yes"},
        {"type": "string", "default": 7},
        {"type": "string", "default": None},
        {"type": "string", "default": {"nested": "object"}},
        {"type": "string", "enum": ["a", "b"], "default": "c"},
        {"type": "string", "oneOf": [{"const": "a"}], "default": "b"},
        {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": ["y"]},
        {"type": "array", "items": {"type": "string"}, "default": [1]},
    ],
)
def test_a_default_that_does_not_fit_its_field_is_not_sent(prop: dict[str, JsonValue]) -> None:
    schema: dict[str, JsonValue] = {"type": "object", "properties": {"f": prop}}
    assert with_defaults(schema, {}) == {}


def test_a_schema_without_properties_changes_nothing() -> None:
    assert with_defaults({"type": "object"}, {"a": 1}) == {"a": 1}
    assert with_defaults({"properties": ["not", "a", "dict"]}, {}) == {}


async def _answer(answer: ElicitAnswer) -> mcp_types.ElicitResult | mcp_types.ErrorData:
    async def handler(asked: McpElicitation) -> ElicitAnswer:
        return answer

    callback = elicitation_callback("srv", handler)
    params = mcp_types.ElicitRequestFormParams(
        message="Please accept with defaults",
        requested_schema=cast("Any", FORM),
    )
    return await callback(cast("Any", None), params)


async def test_the_client_sends_defaults_with_an_accepted_form() -> None:
    result = await _answer(ElicitAnswer(action="accept", content={"age": 41}))
    assert isinstance(result, mcp_types.ElicitResult)
    assert result.action == "accept"
    assert result.content is not None
    assert result.content["age"] == 41 and result.content["name"] == "John Doe"
    assert result.content["verified"] is True and "nick" not in result.content


async def test_an_accept_with_no_content_gets_every_default() -> None:
    result = await _answer(ElicitAnswer(action="accept"))
    assert isinstance(result, mcp_types.ElicitResult)
    assert result.content is not None and result.content["status"] == "active"


async def test_a_declined_form_gets_no_defaults() -> None:
    result = await _answer(ElicitAnswer(action="decline"))
    assert isinstance(result, mcp_types.ElicitResult)
    assert result.action == "decline" and result.content is None
