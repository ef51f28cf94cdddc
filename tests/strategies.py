"""Hypothesis strategies for messages, events and usage, shared by the wire-format tests."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring.events import (
    ApprovalAdded,
    ApprovalExpiring,
    Canvas,
    ErrorEvent,
    Event,
    FinalOutput,
    Finding,
    GuardrailVerdict,
    OutputPartial,
    OutputRetry,
    PendingAction,
    PermissionDenied,
    SteeringQueued,
    SteeringTaken,
    StopReason,
    StreamStarted,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.messages import (
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.thinking import EvalItem
from mainspring.usage import Usage

PROPERTY = settings(max_examples=150, deadline=None, database=None)
"""Modest example counts, no timing flakiness, no example database on disk."""


def depths(quick: int, nightly: int) -> pytest.MarkDecorator:
    """Run a property twice as deep as it needs: ``[quick]`` always, ``[nightly]`` nightly.

    For the costly properties that only prove a fast path matches its reference
    (a hand-written encoder against pydantic's): the test takes ``examples`` and
    runs its own ``@given`` check with that many. The ``[nightly]`` case carries
    the ``nightly`` marker, deselected by default (``make test-nightly``).
    """
    return pytest.mark.parametrize(
        "examples",
        [
            pytest.param(quick, id="quick"),
            pytest.param(nightly, id="nightly", marks=pytest.mark.nightly),
        ],
    )


NASTY_PIECES = (
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "\u2028",
    "\u2029",
    "\x85",
    "\x00",
    "\t",
    "\ufeff",
    "😀",
    "👩\u200d👩\u200d👧",
    "漢字かな",
    "עברית",
    "مرحبا",
    "\u200f",
    '"',
    "\\",
    "data: ",
    "event: ",
    ": comment",
    "id: 1",
)
"""Fragments that have broken line-based wire formats before."""

texts: st.SearchStrategy[str] = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(st.sampled_from(NASTY_PIECES), st.text(max_size=4)), max_size=8).map(
        "".join
    ),
)
"""Short strings, often with line breaks, separators, NUL and non-ASCII text."""

ids: st.SearchStrategy[str] = st.one_of(st.uuids().map(str), texts)
finite_floats: st.SearchStrategy[float] = st.floats(allow_nan=False, allow_infinity=False)
"""NaN never equals itself and infinities are not JSON, so round trips leave them out."""

json_scalars: st.SearchStrategy[JsonValue] = st.one_of(
    st.none(), st.booleans(), st.integers(), finite_floats, texts
)


def _json_containers(children: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[JsonValue]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(texts, children, max_size=3),
    )


json_values: st.SearchStrategy[JsonValue] = st.recursive(
    json_scalars, _json_containers, max_leaves=8
)
json_objects: st.SearchStrategy[dict[str, JsonValue]] = st.dictionaries(
    texts, json_values, max_size=4
)

usages: st.SearchStrategy[Usage] = st.builds(
    Usage,
    input_tokens=st.integers(min_value=0, max_value=10**9),
    cache_read_tokens=st.integers(min_value=0, max_value=10**9),
    cache_write_tokens=st.integers(min_value=0, max_value=10**9),
    output_tokens=st.integers(min_value=0, max_value=10**9),
    reasoning_tokens=st.integers(min_value=0, max_value=10**9),
    requests=st.integers(min_value=0, max_value=10**6),
)

findings: st.SearchStrategy[Finding] = st.builds(
    Finding,
    source=texts,
    message=texts,
    tier=st.sampled_from(("safety", "financial", "ux", "policy")),
    action=st.sampled_from(("block", "confirm", "hint")),
)

EVENT_STRATEGIES: dict[type[Event], st.SearchStrategy[Event]] = {
    StreamStarted: st.builds(StreamStarted, stream_id=ids, session_id=ids),
    TextDelta: st.builds(TextDelta, text=texts),
    ThinkingDelta: st.builds(ThinkingDelta, text=texts, index=st.integers(0, 99)),
    ThinkingDone: st.builds(
        ThinkingDone,
        text=texts,
        signature=st.none() | texts,
        redacted=st.booleans(),
        index=st.integers(0, 99),
        summary_mode=st.none() | texts,
        evaluation=st.lists(
            st.builds(EvalItem, name=texts, verdict=texts, note=texts), max_size=3
        ).map(tuple),
    ),
    ToolCallDelta: st.builds(
        ToolCallDelta,
        tool_use_id=ids,
        name=texts,
        index=st.integers(min_value=0, max_value=2**31),
        args_delta=texts,
    ),
    ToolStart: st.builds(ToolStart, tool_use_id=ids, name=texts, input=json_objects),
    ToolProgress: st.builds(
        ToolProgress,
        tool_use_id=ids,
        name=texts,
        message=texts,
        pct=st.none() | st.floats(min_value=0, max_value=100),
    ),
    ToolResult: st.builds(
        ToolResult, tool_use_id=ids, name=texts, content=texts, is_error=st.booleans()
    ),
    PermissionDenied: st.builds(
        PermissionDenied,
        tool_use_id=ids,
        name=texts,
        reason=texts,
        source=texts,
        principal=st.none() | ids,
    ),
    PendingAction: st.builds(
        PendingAction,
        attempt_id=ids,
        tool_use_id=ids,
        turn_index=st.integers(min_value=0, max_value=10**6),
        name=texts,
        input=json_objects,
        description=texts,
        modifiable_fields=st.lists(texts, max_size=3).map(tuple),
        reason=texts,
        findings=st.lists(findings, min_size=1, max_size=3).map(tuple),
        client_executed=st.booleans(),
        amount_usd=st.none() | finite_floats,
        input_hash=texts,
        details=json_objects,
        can_regenerate=st.booleans(),
        regenerate_input=st.none() | json_objects,
        expires_at=st.none() | finite_floats,
        quorum=st.integers(1, 9),
        allow_self_approval=st.booleans(),
        requested_by=texts,
        policy_version=texts,
    ),
    Canvas: st.builds(
        Canvas, kind=texts, data=json_values, title=texts, tool_use_id=st.none() | ids
    ),
    UsageEvent: st.builds(
        UsageEvent,
        model=texts,
        usage=usages,
        cost_usd=finite_floats,
        total_cost_usd=finite_floats,
    ),
    SteeringQueued: st.builds(
        SteeringQueued,
        steering_id=ids,
        mode=st.sampled_from(("next_step", "follow_up")),
        turn_index=st.integers(0, 10**6),
    ),
    SteeringTaken: st.builds(
        SteeringTaken,
        steering_id=ids,
        mode=st.sampled_from(("next_step", "follow_up")),
        text=texts,
        turn_index=st.integers(0, 10**6),
        step=st.integers(0, 100),
    ),
    OutputPartial: st.builds(OutputPartial, output=json_values),
    OutputRetry: st.builds(OutputRetry, reason=texts, retries=st.integers(0, 99)),
    FinalOutput: st.builds(FinalOutput, output=json_values, turn_index=st.integers(0, 10**6)),
    ApprovalAdded: st.builds(
        ApprovalAdded,
        attempt_id=ids,
        principal=ids,
        approvals=st.lists(ids, max_size=3).map(tuple),
        quorum=st.integers(1, 9),
    ),
    ApprovalExpiring: st.builds(
        ApprovalExpiring,
        attempt_id=ids,
        expires_at=finite_floats,
        seconds_left=finite_floats,
    ),
    GuardrailVerdict: st.builds(
        GuardrailVerdict,
        name=texts,
        stage=st.sampled_from(("input", "output")),
        tripwire=st.booleans(),
        reason=texts,
        info=json_values,
        error=texts,
        turn_index=st.integers(0, 10**6),
    ),
    TurnComplete: st.builds(
        TurnComplete,
        stop_reason=st.sampled_from(get_args(StopReason)),
        turn_index=st.integers(min_value=0, max_value=10**6),
        usage=usages,
        cost_usd=finite_floats,
    ),
    ErrorEvent: st.builds(
        ErrorEvent,
        code=texts,
        message=texts,
        retryable=st.booleans(),
        attempt_id=st.none() | ids,
    ),
}

events: st.SearchStrategy[Event] = st.one_of(*EVENT_STRATEGIES.values())

image_parts: st.SearchStrategy[ImagePart] = st.builds(
    ImagePart,
    media_type=st.sampled_from(("image/png", "image/jpeg", "image/webp")),
    data=st.none() | st.binary(max_size=12).map(lambda b: b.hex()),
    url=st.none() | texts,
)

PART_STRATEGIES: dict[type[Part], st.SearchStrategy[Part]] = {
    TextPart: st.builds(TextPart, text=texts),
    ImagePart: image_parts,
    ToolCallPart: st.builds(ToolCallPart, id=ids, name=texts, arguments=json_objects),
    ToolResultPart: st.builds(
        ToolResultPart,
        tool_use_id=ids,
        name=texts,
        content=texts,
        is_error=st.booleans(),
        images=st.lists(image_parts, max_size=2).map(tuple),
    ),
    ThinkingPart: st.builds(
        ThinkingPart, text=texts, signature=st.none() | texts, redacted=st.booleans()
    ),
}

parts: st.SearchStrategy[Part] = st.one_of(*PART_STRATEGIES.values())

roles: st.SearchStrategy[Role] = st.sampled_from(get_args(Role))

messages: st.SearchStrategy[Message] = st.builds(
    Message,
    role=roles,
    parts=st.lists(parts, max_size=5).map(tuple),
    meta=json_objects,
)

ONE_OF_EACH_EVENT: tuple[Event, ...] = (
    StreamStarted(stream_id="str_1", session_id="ses_1"),
    TextDelta(text="Hello\r\n世界 😀"),
    ThinkingDelta(text="hmm\u2028ok"),
    ThinkingDone(
        text="<eval_summary>- a: ok</eval_summary>",
        signature="c2ln",
        redacted=True,
        index=1,
        summary_mode="default",
        evaluation=(EvalItem(name="a", verdict="ok", note="fine"),),
    ),
    ToolCallDelta(tool_use_id="tu_1", name="search", index=1, args_delta='{"q": "מה'),
    ToolStart(tool_use_id="tu_1", name="search", input={"q": "מה", "n": 3, "deep": [1.5, None]}),
    ToolProgress(tool_use_id="tu_1", name="search", message="page 2/4", pct=50.0),
    ToolResult(tool_use_id="tu_1", name="search", content="no\x00results", is_error=True),
    PermissionDenied(
        tool_use_id="tu_3", name="wipe", reason="'wipe' is on the deny list", principal="user:zoë"
    ),
    PendingAction(
        attempt_id="0b7f3c4e-8a4b-4e8e-9a57-1f2d3c4b5a69",
        tool_use_id="tu_2",
        turn_index=2,
        name="pay",
        input={"to": "Zoë", "amount": 12.5},
        description="Pay Zoë €12.50",
        modifiable_fields=("amount",),
        reason="over the auto tier",
        findings=(
            Finding(source="usd_tier", message="above 10 USD", tier="financial"),
            Finding(source="no_rm_rf", message="looks risky", tier="safety", action="block"),
        ),
        client_executed=True,
        amount_usd=12.5,
    ),
    Canvas(kind="chart", data={"series": [[1, 2], [3, 4]]}, title="Spend", tool_use_id="tu_2"),
    UsageEvent(
        model="scripted",
        usage=Usage(input_tokens=10, cache_read_tokens=5, output_tokens=7, requests=1),
        cost_usd=0.25,
        total_cost_usd=1.5,
    ),
    SteeringQueued(steering_id="steer_1", mode="next_step", turn_index=3),
    SteeringTaken(steering_id="steer_1", mode="follow_up", text="and then?", turn_index=4, step=1),
    OutputPartial(output={"city": "Mexico C", "tags": ["big", None]}),
    OutputRetry(reason="- population: Field required", retries=1),
    FinalOutput(output={"city": "Mexico City", "population": 9_200_000}, turn_index=2),
    ApprovalAdded(attempt_id="att-1", principal="alice", approvals=("alice",), quorum=2),
    ApprovalExpiring(attempt_id="att-1", expires_at=1_800_000_000.0, seconds_left=120.0),
    GuardrailVerdict(
        name="no_pii", stage="input", tripwire=True, reason="an IBAN", info={"score": 0.9}
    ),
    TurnComplete(stop_reason="pending_action", turn_index=2, usage=Usage(requests=2), cost_usd=1.5),
    ErrorEvent(code="model_http", message="502 from upstream", retryable=True, attempt_id="a"),
)
"""One hand-written instance of every event type."""
