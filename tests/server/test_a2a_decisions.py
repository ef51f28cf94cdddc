"""The decision a reply to an A2A ``input-required`` task carries (``decision_of``)."""

from __future__ import annotations

import pytest
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Part
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring.decisions import Approve, ClientResult, Reject
from mainspring.server._a2a_executor import BadReply, decision_of, session_id_of
from mainspring.server._auth import Principal
from tests.strategies import json_objects, json_values, texts

SHOWN = "attempt.hash.signature"
QUICK = settings(max_examples=60)

safe_ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
exact_json: st.SearchStrategy[JsonValue] = st.recursive(
    st.one_of(st.none(), st.booleans(), safe_ints, texts),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(texts, children, max_size=3)
    ),
    max_leaves=8,
)


def data(value: object) -> list[Part]:
    return [new_data_part(value)]


@QUICK
@given(st.dictionaries(texts, json_values, max_size=5), st.sampled_from(["approve", "reject"]))
def test_any_data_part_is_a_decision_or_a_clear_refusal(
    fields: dict[str, JsonValue], kind: str
) -> None:
    try:
        approval_id, decision = decision_of(data({**fields, "decision": kind}), shown=SHOWN)
    except BadReply as exc:
        assert str(exc)
    else:
        assert approval_id
        assert isinstance(decision, Approve | Reject)


@QUICK
@given(json_objects)
def test_a_data_part_without_a_decision_is_not_one(fields: dict[str, JsonValue]) -> None:
    fields.pop("decision", None)
    with pytest.raises(BadReply, match="reply 'yes' or 'no'"):
        decision_of(data(fields), shown=SHOWN)


@QUICK
@given(st.dictionaries(texts, exact_json, max_size=4))
def test_edits_arrive_as_sent(edits: dict[str, JsonValue]) -> None:
    approval_id, decision = decision_of(
        data({"decision": "approve", "approval_id": "a.b.c", "edits": edits}), shown=SHOWN
    )
    assert approval_id == "a.b.c"
    assert decision == Approve(edits=edits)


@QUICK
@given(texts)
def test_text_is_yes_no_or_refused(text: str) -> None:
    words = text.strip().rstrip(".!").strip().lower()
    try:
        approval_id, decision = decision_of([new_text_part(text)], shown=SHOWN)
    except BadReply:
        assert words not in {"yes", "y", "approve", "approved", "ok", "okay"}
        assert words not in {"no", "n", "reject", "rejected", "deny", "denied"}
    else:
        assert approval_id == SHOWN
        assert isinstance(decision, Approve | Reject)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([new_text_part("  Yes. ")], Approve()),
        ([new_text_part("NO!")], Reject()),
        (data({"decision": "reject", "reason": "too much"}), Reject(reason="too much")),
        (
            data({"decision": "client_result", "content": "done", "is_error": True}),
            ClientResult(content="done", is_error=True),
        ),
        (data({"decision": "approve", "edits": {"amount_usd": 15}}), Approve({"amount_usd": 15})),
        # A data decision wins over chatter beside it.
        ([new_text_part("no"), new_data_part({"decision": "approve"})], Approve()),
    ],
)
def test_the_documented_replies(parts: list[Part], expected: object) -> None:
    assert decision_of(parts, shown=SHOWN) == (SHOWN, expected)


@pytest.mark.parametrize(
    "value",
    [
        {"decision": "approve", "approval_id": ""},
        {"decision": "approve", "approval_id": 5},
        {"decision": "client_result"},
        {"decision": "client_result", "content": "x", "is_error": "yes"},
        {"decision": None},
    ],
)
def test_malformed_decisions_are_refused(value: dict[str, JsonValue]) -> None:
    with pytest.raises(BadReply):
        decision_of(data(value), shown=SHOWN)


@QUICK
@given(texts, texts, texts)
def test_contexts_of_different_principals_never_share_a_session(
    context: str, first: str, second: str
) -> None:
    a = session_id_of("wallet", Principal(first), context)
    b = session_id_of("wallet", Principal(second), context)
    assert (a == b) == (first == second)
    assert a.startswith("a2a-") and len(a) == 36
