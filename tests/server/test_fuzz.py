"""Hostile bodies and headers on every route: always a 4xx (or a stream), never a 500."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.conftest import ALICE, client_for
from tests.strategies import depths

pytestmark = pytest.mark.slow

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.dictionaries(
        st.sampled_from(["message", "resume_stream_id", "after", "decision", "edits", "reason",
                         "content", "is_error"]),
        json_values,
        max_size=4,
    ).map(lambda d: json.dumps(d).encode()),
)  # fmt: skip
headers = st.dictionaries(
    st.sampled_from(["Last-Event-ID", "Content-Type", "X-API-Key"]),
    # (header values an HTTP client can send: no surrounding whitespace)
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60).filter(
        lambda v: v == v.strip()
    ),
    max_size=2,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(["messages", "decisions/x.y.z", "stream", "cancel", "pending", ""]),
    method=st.sampled_from(["POST", "GET", "DELETE"]),
    body=bodies,
    extra=headers,
)
def test_no_input_makes_the_server_fail(
    base: str, route: str, method: str, body: bytes, extra: dict[str, str]
) -> None:
    async def probe() -> None:
        async with client_for(base, ALICE) as client:
            sid = (await client.post("/v1/sessions")).json()["session_id"]
            url = f"/v1/sessions/{sid}/{route}".rstrip("/")
            sent: dict[str, Any] = {"headers": {"content-type": "application/json", **extra}}
            if method == "POST":
                sent["content"] = body
            async with client.stream(method, url, **sent) as response:
                if response.status_code == 200 and "event-stream" in response.headers.get(
                    "content-type", ""
                ):
                    return  # a real stream (a valid message got through): fine
                await response.aread()
                assert response.status_code < 500, (method, url, body, response.text)

    anyio.run(probe)


@pytest.fixture(scope="module")
def base() -> Any:
    from mainspring.demo import demo_agent
    from mainspring.server import create_app
    from tests.server.conftest import config
    from tests.server.servers import serving

    with serving(create_app(demo_agent(), config(rate_per_minute=0))) as url:
        yield url


# -- growth: a request body is parsed in time linear in its size ------------------------------


def _body_parser() -> Any:
    from pydantic import TypeAdapter

    from mainspring.server._schemas import DecisionBody, MessageBody

    decisions: TypeAdapter[Any] = TypeAdapter(DecisionBody)
    messages: TypeAdapter[Any] = TypeAdapter(MessageBody)

    def parse(body: bytes) -> object:
        """What the routes run on a body: the JSON text, then the route's model."""
        try:
            data = json.loads(body)
            adapter = decisions if isinstance(data, dict) and "decision" in data else messages
            return adapter.validate_python(data)
        except (ValueError, RecursionError):  # a 422 or 400 (the server answers so)
            return None

    return parse


BODY_SHAPES: dict[str, Any] = {
    "edits-many-fields": lambda n: json.dumps(
        {"decision": "approve", "edits": {f"f{i}": i for i in range(n // 12)}}
    ).encode(),
    "edits-one-big-value": lambda n: json.dumps(
        {"decision": "approve", "edits": {"rows": [{"a": [1, "x"]}] * (n // 20)}}
    ).encode(),
    "long-message-over-the-cap": lambda n: json.dumps({"message": "x" * n}).encode(),
    "client-result": lambda n: json.dumps(
        {"decision": "client_result", "content": "\u00e9" * (n // 8)}
    ).encode(),
    "not-json": lambda n: b'{"decision": "approve", "edits": ' + b"[1," * (n // 3),
}


BODY_BOUNDS: dict[str, float] = {"edits-many-fields": 1_000.0}
"""Shapes whose large input leaves the CPU caches: an 83,000-key dict costs more per
byte than an 800-key one (126-172x at load 4, 301x once at load 7, against the
default 300x). 1,000x is still a tenth of what a quadratic step gives (10,000x)."""


@pytest.mark.parametrize("shape", sorted(BODY_SHAPES))
def test_a_body_is_parsed_in_time_linear_in_its_size(shape: str) -> None:
    from tests.growth import assert_linear

    assert_linear(_body_parser(), BODY_SHAPES[shape], bound=BODY_BOUNDS.get(shape, 300.0))


@depths(quick=1, nightly=20)  # the named shapes above run always; random ones are depth
def test_any_repeated_edit_value_parses_in_linear_time(examples: int) -> None:
    from tests.growth import assert_linear

    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(value=json_values)
    def check(value: Any) -> None:
        unit = len(json.dumps(value)) + 1

        def make(n: int) -> bytes:
            edits = {"v": [value] * (n // unit)}
            return json.dumps({"decision": "approve", "edits": edits}).encode()

        assert_linear(_body_parser(), make)

    check()
