"""What an MCP server sends is parsed in time linear in its size.

A server's JSON-RPC messages (a tool result with one huge block, thousands of
small blocks, large structured content, a notification), its stderr, and the
content blocks the client turns into text: each is measured at 10 KB and
1 MB, a ratio of CPU time, never an absolute time (see ``tests/growth.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import mcp.types as mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from mainspring.mcp._results import block_text
from mainspring.mcp._stderr import StderrTail
from tests.growth import assert_linear
from tests.strategies import depths

pytestmark = pytest.mark.slow

_MESSAGE: TypeAdapter[object] = TypeAdapter(mcp_types.JSONRPCMessage)


def _result(content: list[dict[str, object]], **extra: object) -> bytes:
    body = {"jsonrpc": "2.0", "id": 7, "result": {"content": content, **extra}}
    return json.dumps(body).encode()


def read_message(line: bytes) -> int:
    """A line from the server, as the client reads it: the message, its result, its text."""
    message = _MESSAGE.validate_json(line)
    root = getattr(message, "root", message)  # (a RootModel in older SDKs)
    if not isinstance(root, mcp_types.JSONRPCResponse):
        return 0
    result = mcp_types.CallToolResult.model_validate(root.result)
    return sum(len(block_text(block)) for block in result.content)


MESSAGE_SHAPES: dict[str, Callable[[int], bytes]] = {
    "one-big-text-block": lambda n: _result([{"type": "text", "text": "x" * n}]),
    "escaped-text": lambda n: _result([{"type": "text", "text": "\u00e9\n\"" * (n // 12)}]),
    "many-small-blocks": lambda n: _result([{"type": "text", "text": "x"}] * (n // 30)),
    "structured-content": lambda n: _result(
        [], structuredContent={"rows": [{"a": i, "b": "x"} for i in range(n // 20)]}
    ),
    "resource-blocks": lambda n: _result(
        [{"type": "resource", "resource": {"uri": "file:///a", "text": "t"}}] * (n // 60)
    ),
    "notification": lambda n: json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message",
         "params": {"level": "info", "data": ["x"] * (n // 5)}}
    ).encode(),
    "not-json": lambda n: b'{"jsonrpc": "2.0", "result": ' + b"[" * 10 + b"1," * (n // 2),
}  # fmt: skip


def _tolerant(line: bytes) -> int:
    try:
        return read_message(line)
    except ValueError:  # (pydantic's ValidationError is a ValueError)
        return -1


@pytest.mark.parametrize("shape", sorted(MESSAGE_SHAPES))
def test_a_server_message_parses_in_time_linear_in_its_size(shape: str) -> None:
    assert_linear(_tolerant, MESSAGE_SHAPES[shape])


def _feed(chunks: list[bytes]) -> int | None:
    tail = StderrTail("s")
    for chunk in chunks:
        tail.feed(chunk)
    return tail.exit_status


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda n: [b"a line\n"] * (n // 7), id="many-lines"),
        pytest.param(lambda n: [b"x" * 1024] * (n // 1024), id="one-long-line"),
        pytest.param(lambda n: [b"\n"] * n, id="byte-by-byte"),
    ],
)
def test_a_server_stderr_is_read_in_time_linear_in_its_size(
    make: Callable[[int], list[bytes]],
) -> None:
    assert_linear(_feed, make)


@depths(quick=1, nightly=20)  # the named shapes above run always; random ones are depth
def test_any_repeated_result_shape_parses_in_linear_time(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(
        block=st.fixed_dictionaries(
            {"type": st.just("text"), "text": st.text(min_size=1, max_size=20)}
        ),
        per_block=st.integers(1, 50),
    )
    def check(block: dict[str, object], per_block: int) -> None:
        unit = len(json.dumps(block)) + 2
        assert_linear(
            _tolerant, lambda n: _result([block] * max(1, n // unit // per_block * per_block))
        )

    check()
