from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.context import (
    MainspringAdapter,
    MessageAdapter,
    PrefixChange,
    Transcript,
)
from mainspring.context.transcript import message_segments, tool_call_text
from mainspring.errors import PrefixMutationError
from mainspring.messages import Message, TextPart, ToolCallPart, ToolResultPart

ADAPTER = MainspringAdapter()


def call(call_id: str) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(id=call_id, name="t", arguments={}),))


def result(call_id: str) -> Message:
    return Message.tool_results([ToolResultPart(tool_use_id=call_id, name="t", content="ok")])


def new(
    messages: Sequence[Message] = (), *, strict: bool = True, identity: bool = False
) -> Transcript[Message]:
    return Transcript(ADAPTER, messages, strict=strict, trust_message_identity=identity)


def snapshot(t: Transcript[Any]) -> tuple[object, ...]:
    return (list(t.messages), t.last_user_index, t.generation)


def assert_indexes_fresh(t: Transcript[Message]) -> None:
    assert t.last_user_index == new(list(t.messages)).last_user_index


# -- append and sync -------------------------------------------------------


def test_append_commits_in_order_and_indexes() -> None:
    t = new()
    t.append([Message.user("hi"), call("c1")])
    t.append([result("c1"), Message.assistant("done")])
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant"]
    assert t.last_user_index == 0
    assert len(t) == 4
    assert t.generation == 0


def test_sync_commits_only_the_delta() -> None:
    history = [Message.user("a"), Message.assistant("b")]
    t = new(history)
    assert t.sync([*history, Message.user("c")]) == 1
    assert t.last_user_index == 2
    assert t.sync(list(t.messages)) == 0
    assert len(t) == 3


def test_sync_accepts_equal_values_in_new_objects() -> None:
    t = new([Message.user("a"), call("c1")])
    rebuilt = [Message.user("a"), call("c1"), result("c1")]
    assert t.sync(rebuilt) == 1
    assert list(t.messages) == rebuilt and t.messages[2] is rebuilt[2]
    assert t.generation == 0


def test_sync_into_empty_transcript() -> None:
    t = new()
    assert t.sync([Message.user("a")]) == 1
    assert t.last_user_index == 0


def test_view_is_stable_and_read_only() -> None:
    t = new([Message.user("a")])
    view = t.messages
    t.append([Message.user("b")])
    assert len(view) == 1
    assert view[-1].text == "a"
    assert list(view[0:5]) == [Message.user("a")]
    with pytest.raises(IndexError):
        view[1]


# -- strict mode -----------------------------------------------------------


def test_strict_rejects_a_changed_message_and_leaves_state_untouched() -> None:
    changes: list[PrefixChange] = []
    t = Transcript(
        ADAPTER, [Message.user("a"), Message.assistant("b")], on_prefix_change=changes.append
    )
    before = snapshot(t)
    with pytest.raises(PrefixMutationError, match="committed message 1"):
        t.sync([Message.user("a"), Message.assistant("B"), Message.user("c")])
    assert snapshot(t) == before
    assert changes == []
    assert t.sync([Message.user("a"), Message.assistant("b"), Message.user("c")]) == 1


def test_strict_rejects_a_shortened_list() -> None:
    t = new([Message.user("a"), Message.assistant("b")])
    before = snapshot(t)
    with pytest.raises(PrefixMutationError):
        t.sync([Message.user("a")])
    assert snapshot(t) == before


def test_meta_is_part_of_the_value() -> None:
    t = new([Message.user("a")])
    with pytest.raises(PrefixMutationError):
        t.sync([Message(role="user", parts=(TextPart(text="a"),), meta={"k": 1})])


# -- relaxed mode ----------------------------------------------------------


def test_relaxed_starts_a_generation_reindexes_and_reports() -> None:
    changes: list[PrefixChange] = []
    t = Transcript(
        ADAPTER,
        [Message.user("a"), call("c1"), result("c1"), Message.user("q")],
        strict=False,
        on_prefix_change=changes.append,
    )
    assert t.last_user_index == 3
    old_view = t.messages
    assert t.sync([Message.user("a"), call("c2"), result("c2")]) == 2
    assert t.generation == 1
    assert t.last_change == PrefixChange(1, 1, "sync: committed prefix changed")
    assert changes == [t.last_change]
    assert list(t.messages) == [Message.user("a"), call("c2"), result("c2")]
    assert t.last_user_index == 0
    assert_indexes_fresh(t)
    assert len(old_view) == 4 and old_view[1] == call("c1")
    t.sync([Message.user("z")])
    assert t.generation == 2
    assert changes[-1].first_changed_index == 0


def test_relaxed_truncation_and_default_warning_goes_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = new([Message.user("a"), Message.assistant("b")], strict=False)
    with caplog.at_level(logging.WARNING, logger="mainspring.context"):
        assert t.sync([Message.user("a")]) == 0
    assert t.generation == 1
    assert list(t.messages) == [Message.user("a")]
    record = caplog.records[-1]
    assert getattr(record, "prefix_change") == {  # noqa: B009
        "generation": 1,
        "first_changed_index": 1,
        "reason": "sync: committed prefix changed",
        "processor_id": None,
    }


def test_invalidate_prefix_keeps_messages_and_reports_the_change() -> None:
    changes: list[PrefixChange] = []
    t = Transcript(ADAPTER, [Message.user("a")], strict=False, on_prefix_change=changes.append)
    before = snapshot(t)
    change = t.invalidate_prefix("system prompt changed", "base-system")
    assert change == PrefixChange(1, 0, "system prompt changed", "base-system")
    assert changes == [change] and t.last_change == change
    assert snapshot(t) == (*before[:2], 1)


def test_invalidate_prefix_in_strict_mode_raises_and_changes_nothing() -> None:
    changes: list[PrefixChange] = []
    t = Transcript(ADAPTER, [Message.user("a")], on_prefix_change=changes.append)
    before = snapshot(t)
    with pytest.raises(PrefixMutationError, match="strict mode"):
        t.invalidate_prefix("system prompt changed")
    assert changes == [] and t.last_change is None and snapshot(t) == before


# -- identity fast path ----------------------------------------------------


class CountingAdapter(MainspringAdapter):
    def __init__(self) -> None:
        self.calls = 0

    def fingerprint(self, message: Message) -> bytes:
        self.calls += 1
        return super().fingerprint(message)


def test_identity_fast_path_checks_only_the_last_committed_message() -> None:
    adapter = CountingAdapter()
    history = [Message.user(str(i)) for i in range(50)]
    t = Transcript(adapter, history, trust_message_identity=True)
    adapter.calls = 0
    # Only the last committed object is looked at: an earlier replacement is
    # trusted away, as documented (the host promises not to do that).
    replaced = [Message.user("x"), *history[1:], Message.user("new")]
    assert t.sync(replaced) == 1
    assert adapter.calls == 0  # digests are taken on first need, never for the delta
    assert t.messages[0].text == "0"


def test_identity_fast_path_falls_back_to_values() -> None:
    adapter = CountingAdapter()
    history = [Message.user(str(i)) for i in range(5)]
    t = Transcript(adapter, history, trust_message_identity=True)
    adapter.calls = 0
    with pytest.raises(PrefixMutationError):
        t.sync([*history[:4], Message.user("changed")])
    assert adapter.calls == 2  # the new object, and the committed one (then cached)
    adapter.calls = 0
    assert t.sync([*history[:4], Message.user("4")]) == 0  # equal value, new object
    assert adapter.calls == 1


def test_value_mode_fingerprints_only_replaced_objects() -> None:
    adapter = CountingAdapter()
    history = [Message.user(str(i)) for i in range(20)]
    t = Transcript(adapter, history)
    adapter.calls = 0
    assert t.sync([*history, Message.user("x")]) == 1
    assert adapter.calls == 0  # same objects, and the delta is not digested on commit


# -- adapters --------------------------------------------------------------


def test_default_adapter() -> None:
    m = Message(role="user", parts=(TextPart(text="a"), TextPart(text="b")), meta={"k": [1]})
    clone = ADAPTER.clone(m)
    assert clone == m and clone.meta is not m.meta
    assert ADAPTER.text_segments(m) == ["a", "b"]
    assert ADAPTER.role(m) == "user"
    assert ADAPTER.create_user("q") == Message.user("q")
    assert ADAPTER.text_segments(ADAPTER.append_user_content(m, "c")) == ["a", "b", "c"]
    assert ADAPTER.fingerprint(m) == ADAPTER.fingerprint(clone)
    assert ADAPTER.fingerprint(m) != ADAPTER.fingerprint(Message.user("ab"))
    assert ADAPTER.tool_call_ids(call("c1")) == ["c1"] and ADAPTER.tool_result_ids(call("c1")) == []
    assert ADAPTER.tool_result_ids(result("c1")) == ["c1"] and ADAPTER.tool_call_ids(m) == []


Dict = dict[str, Any]


class DictAdapter:
    """Host messages as plain OpenAI-style dicts."""

    def clone(self, message: Dict) -> Dict:
        return copy.deepcopy(message)

    def fingerprint(self, message: Dict) -> bytes:
        from mainspring.context import json_fingerprint

        return json_fingerprint(message)

    def role(self, message: Dict) -> str:
        return str(message["role"])

    def text_segments(self, message: Dict) -> Sequence[str]:
        content = message.get("content")
        return [content] if isinstance(content, str) else []

    def create_user(self, text: str) -> Dict:
        return {"role": "user", "content": text}

    def append_user_content(self, message: Dict, text: str) -> Dict:
        return {**message, "content": f"{message.get('content') or ''}{text}"}


def test_custom_dict_adapter() -> None:
    adapter: MessageAdapter[Dict] = DictAdapter()
    user = adapter.create_user("hi")
    history: list[Dict] = [
        user,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "k"}]},
        {"role": "tool", "tool_call_id": "k", "content": "42"},
    ]
    t = Transcript(adapter, history[:1])
    assert t.sync([copy.deepcopy(m) for m in history]) == 2
    assert list(t.messages) == history and t.last_user_index == 0
    assert adapter.text_segments(adapter.append_user_content(user, "!")) == ["hi!"]
    assert adapter.clone(user) == user and adapter.clone(user) is not user
    with pytest.raises(PrefixMutationError):
        t.sync([{"role": "user", "content": "changed"}, *history[1:]])


# -- properties ------------------------------------------------------------

messages = st.one_of(
    st.builds(Message.user, st.sampled_from("abc")),
    st.builds(Message.assistant, st.sampled_from("abc")),
    st.builds(call, st.sampled_from(["c1", "c2", "c3"])),
    st.builds(result, st.sampled_from(["c1", "c2", "c3"])),
)
deltas = st.lists(messages, max_size=4)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), deltas),
        st.tuples(st.just("sync"), deltas),
        st.tuples(st.just("sync_equal_copies"), deltas),
        st.tuples(st.just("mutate"), st.integers(0, 30), deltas),
        st.tuples(st.just("truncate"), st.integers(0, 30)),
    ),
    max_size=15,
)


def run(t: Transcript[Message], op: tuple[Any, ...], step: int) -> list[Message] | None:
    """Apply ``op``; the list the host synced, or None for an append."""
    current = list(t.messages)
    kind = op[0]
    if kind == "append":
        t.append(op[1])
        return None
    if kind == "sync":
        full = [*current, *op[1]]
    elif kind == "sync_equal_copies":
        full = [ADAPTER.clone(m) for m in current] + op[1]
    elif kind == "mutate":
        if not current:
            return None
        i = op[1] % len(current)
        full = [*current[:i], Message.user(f"mutated-{step}"), *current[i + 1 :], *op[2]]
        if t.trust_message_identity and i != len(current) - 1:
            # The identity contract: a host that edits its prefix does not keep
            # the last committed object, so the fast path falls back to values.
            full[len(current) - 1] = ADAPTER.clone(current[-1])
    else:
        full = current[: op[1] % (len(current) + 1)]
    t.sync(full)
    return full


@settings(max_examples=150, deadline=None)
@given(ops=ops, identity=st.booleans())
def test_strict_never_changes_state_on_rejection(
    ops: list[tuple[Any, ...]], identity: bool
) -> None:
    t = new(identity=identity)
    expected: list[Message] = []
    for step, op in enumerate(ops):
        before = snapshot(t)
        try:
            full = run(t, op, step)
        except PrefixMutationError:
            assert op[0] in {"mutate", "truncate"}
            assert snapshot(t) == before
        else:
            expected = list(t.messages) if full is None else full
            assert [ADAPTER.fingerprint(m) for m in t.messages] == [
                ADAPTER.fingerprint(m) for m in expected
            ]
        assert t.generation == 0
        assert_indexes_fresh(t)


@settings(max_examples=150, deadline=None)
@given(ops=ops, identity=st.booleans())
def test_relaxed_indexes_always_equal_a_rebuild(ops: list[tuple[Any, ...]], identity: bool) -> None:
    changes: list[PrefixChange] = []
    t = Transcript(
        ADAPTER, strict=False, trust_message_identity=identity, on_prefix_change=changes.append
    )
    for step, op in enumerate(ops):
        generation = t.generation
        full = run(t, op, step)
        if full is not None:
            assert [ADAPTER.fingerprint(m) for m in t.messages] == [
                ADAPTER.fingerprint(m) for m in full
            ]
        assert t.generation in {generation, generation + 1}
        assert len(changes) == t.generation
        assert_indexes_fresh(t)


class RoleCountingAdapter(MainspringAdapter):
    def __init__(self) -> None:
        self.looked_at = 0

    def role(self, message: Message) -> str:
        self.looked_at += 1
        return message.role


def test_the_last_user_message_is_found_when_read_looking_at_each_message_once() -> None:
    adapter = RoleCountingAdapter()
    t = Transcript(adapter, [Message.user(f"q{i}") for i in range(1_000)])
    t.append([call("c1"), result("c1")])
    assert adapter.looked_at == 0  # committing is a list extend
    assert t.last_user_index == 999
    assert adapter.looked_at == 3  # from the newest back to the first user message
    assert t.last_user_index == 999
    assert adapter.looked_at == 3  # read again: nothing is looked at twice
    t.append([Message.user("more"), Message.assistant("done"), result("c2")])
    assert t.last_user_index == 1_002
    assert adapter.looked_at == 6  # only the delta
    t.append([Message.assistant("more")])
    assert t.last_user_index == 1_002
    assert adapter.looked_at == 7  # a delta without a user message keeps the last one
    assert_indexes_fresh(t)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_a_tool_call_counts_as_its_name_and_compact_json(arguments: dict[str, Any]) -> None:
    import json

    part = ToolCallPart(id="c", name="lookup", arguments=arguments)
    compact = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    assert tool_call_text(part) == "lookup" + compact
    message = Message(role="assistant", parts=(TextPart(text="hm"), part))
    assert message_segments(message) == [("assistant", "hm"), ("tool_call", "lookup" + compact)]


def test_tool_call_arguments_that_are_not_json_raise_a_type_error() -> None:
    part = ToolCallPart(id="c", name="lookup", arguments={"x": object()})  # type: ignore[dict-item]  # not JSON on purpose: the test checks the error
    with pytest.raises(TypeError, match="not JSON serializable"):
        tool_call_text(part)
