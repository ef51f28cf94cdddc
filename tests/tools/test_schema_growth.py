"""Raw JSON schemas (a client tool's, an MCP server's) and the arguments checked against them
are handled in time linear in their size.

Measured through the one entry point every raw-schema call takes
(:meth:`Tool.validate`, with the tool built from the schema each time when the
schema is what grows), at 1 KB and 100 KB: building a validator costs about a
millisecond per 100 bytes of schema and validating about one per 700 bytes of
arguments, so a megabyte takes many seconds a round; 100 times the size still
tells linear from quadratic. A ratio of CPU time, never an absolute time (see
``tests/growth.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.errors import ConfigError, ToolInputError
from mainspring.tools import _schemas, client_tool
from tests.growth import assert_linear
from tests.strategies import depths

pytestmark = pytest.mark.slow

ROWS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["id"],
            },
        },
        "note": {"type": "string", "maxLength": 10_000_000},
    },
}
ROWS_TOOL = client_tool("rows", description="Rows.", input_schema=ROWS)


def validate_rows(args: dict[str, Any]) -> None:
    try:
        ROWS_TOOL.validate(args)
    except ToolInputError:
        pass


ARGUMENT_SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "many-rows": lambda n: {"rows": [{"id": i, "name": "x"} for i in range(n // 24)]},
    "one-long-string": lambda n: {"note": "x" * n},
    "every-row-invalid": lambda n: {"rows": [{"id": "x"}] * (n // 11)},
}


@pytest.mark.parametrize("shape", sorted(ARGUMENT_SHAPES))
def test_arguments_validate_in_time_linear_in_their_size(shape: str) -> None:
    assert_linear(validate_rows, ARGUMENT_SHAPES[shape], small=1_000, large=100_000)


def build_and_validate(schema: dict[str, Any]) -> None:
    # Schemas that compiled once skip the meta-schema check when listed again, and
    # only small ones are remembered: forget them, so both sizes pay the same steps.
    _schemas._COMPILED.clear()
    try:
        client_tool("t", description="T.", input_schema=schema).validate({"p0": "x"})
    except (ConfigError, ToolInputError):
        pass


def _properties(n: int) -> dict[str, Any]:
    props = {f"p{i}": {"type": "string", "description": "a field"} for i in range(n // 50)}
    return {"type": "object", "properties": props, "required": ["p0"]}


def _local_refs(n: int) -> dict[str, Any]:
    count = n // 40
    defs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": "#/$defs/leaf"}}}
            for i in range(count)}  # fmt: skip
    defs["leaf"] = {"type": "string"}
    props = {f"p{i}": {"$ref": f"#/$defs/d{i}"} for i in range(min(count, 100))}
    return {"type": "object", "$defs": defs, "properties": props}


def _enum(n: int) -> dict[str, Any]:
    values = [f"v{i}" for i in range(n // 8)]
    return {"type": "object", "properties": {"p0": {"enum": values}}}


def _nested(n: int) -> dict[str, Any]:
    depth = min(n // 60, 30)
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        inner = {"type": "object", "properties": {"a": inner}}
    schema = _properties(n - len(json.dumps(inner)))
    schema["properties"]["deep"] = inner
    return schema


SCHEMA_SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "many-properties": _properties,
    "many-local-refs": _local_refs,
    "long-enum": _enum,
    "nested-objects": _nested,
}


@pytest.mark.parametrize("shape", sorted(SCHEMA_SHAPES))
def test_a_schema_is_compiled_and_used_in_time_linear_in_its_size(shape: str) -> None:
    assert_linear(build_and_validate, SCHEMA_SHAPES[shape], small=1_000, large=100_000)


@depths(quick=1, nightly=10)  # the named shapes above run always; more fields are depth
def test_any_repeated_property_shape_compiles_in_linear_time(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(
        field=st.sampled_from(
            [
                {"type": "string"},
                {"type": "integer", "minimum": 0},
                {"type": "array", "items": {"type": "number"}},
                {"anyOf": [{"type": "string"}, {"type": "null"}]},
                {"type": "string", "pattern": "^[a-z]+$"},
            ]
        ),
    )
    def check(field: dict[str, Any]) -> None:
        unit = len(json.dumps(field)) + 10

        def make(n: int) -> dict[str, Any]:
            return {"type": "object", "properties": {f"p{i}": field for i in range(n // unit)}}

        assert_linear(build_and_validate, make, small=1_000, large=100_000)

    check()
