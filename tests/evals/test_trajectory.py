"""The trajectory matcher: exact, in order, subset; with partial arguments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.errors import ConfigError
from mainspring.evals import ToolCall, ToolCalls, match_calls
from mainspring.evals.trace import CaseTrace
from mainspring.evals.trajectory import MODES, MatchMode

A, B, C = ToolCall("a"), ToolCall("b"), ToolCall("c")


@pytest.mark.parametrize(
    ("expected", "actual", "mode", "ok"),
    [
        ([A, B], [A, B], "exact", True),
        ([A, B], [B, A], "exact", False),
        ([A, B], [A, B, C], "exact", False),
        ([A, B], [A, C, B], "in_order", True),
        ([A, B], [B, A], "in_order", False),
        ([A, B], [B, C, A], "subset", True),
        ([A, A], [A], "subset", False),
        ([], [], "exact", True),
        ([], [A], "exact", False),
        ([], [A], "subset", True),
    ],
)
def test_modes(expected: list[ToolCall], actual: list[ToolCall], mode: MatchMode, ok: bool) -> None:
    assert match_calls(expected, actual, mode).ok is ok


def test_arguments_given_must_match_and_others_may_be_anything() -> None:
    pay = ToolCall("pay", {"to": "alice", "amount_usd": 20, "memo": "rent"})
    assert match_calls([ToolCall("pay", {"to": "alice"})], [pay]).ok
    assert match_calls([ToolCall("pay", {"amount_usd": 20.0})], [pay]).ok  # 20 == 20.0
    assert not match_calls([ToolCall("pay", {"to": "bob"})], [pay]).ok
    assert not match_calls([ToolCall("pay", {"fee": None})], [pay]).ok  # a missing argument


def test_subset_finds_the_assignment_a_greedy_choice_misses() -> None:
    # The first expected call (any pay) could take the only pay to alice; the
    # matcher must give it the pay to bob instead.
    expected = [ToolCall("pay"), ToolCall("pay", {"to": "alice"})]
    actual = [ToolCall("pay", {"to": "alice"}), ToolCall("pay", {"to": "bob"})]
    assert match_calls(expected, actual, "subset").ok


def test_the_reason_names_both_lists() -> None:
    result = match_calls([ToolCall("pay", {"to": "bob"})], [A], "in_order")
    assert result.reason == "expected [pay{'to': 'bob'}] (in_order), got [a]"


def test_short_forms_and_bad_ones() -> None:
    check = ToolCalls(["a", {"pay": {"to": "bob"}}, ToolCall("c")])
    assert check.expected == (A, ToolCall("pay", {"to": "bob"}), C)
    with pytest.raises(ConfigError, match="with one name"):
        ToolCalls([{"a": {}, "b": {}}])
    with pytest.raises(ConfigError, match="must be a mapping"):
        ToolCalls([{"a": 1}])  # type: ignore[dict-item]  # the bad input under test
    with pytest.raises(ConfigError, match="mode is one of"):
        ToolCalls([], mode="loose")  # type: ignore[arg-type]  # the bad input under test
    with pytest.raises(ConfigError, match="of is 'calls' or 'ran'"):
        ToolCalls([], of="asked")  # type: ignore[arg-type]  # the bad input under test


@pytest.mark.anyio
async def test_the_score_is_the_share_matched() -> None:
    trace = CaseTrace(calls=(A, B), ran=(A,))
    assert (await ToolCalls(["a", "c"], mode="subset").evaluate(trace)).score == 0.5
    assert (await ToolCalls(["a"], mode="exact").evaluate(trace)).score == 0.5  # b unexpected
    ran = await ToolCalls(["a"], of="ran").evaluate(trace)
    assert ran.passed and ran.score == 1.0


names = st.sampled_from(["a", "b", "c"])
calls = st.builds(
    ToolCall, names, st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2)
)
call_lists = st.lists(calls, max_size=6)


@given(call_lists)
def test_a_trajectory_matches_itself_in_every_mode(actual: list[ToolCall]) -> None:
    for mode in MODES:
        assert match_calls(actual, actual, mode).ok


@given(call_lists, call_lists)
def test_exact_implies_in_order_implies_subset(
    expected: list[ToolCall], actual: list[ToolCall]
) -> None:
    exact = match_calls(expected, actual, "exact").ok
    in_order = match_calls(expected, actual, "in_order").ok
    subset = match_calls(expected, actual, "subset").ok
    assert not exact or in_order
    assert not in_order or subset


@given(call_lists, call_lists, st.randoms(use_true_random=False))
def test_subset_ignores_the_order_of_the_actual_calls(
    expected: list[ToolCall], actual: list[ToolCall], random: object
) -> None:
    shuffled = list(actual)
    random.shuffle(shuffled)  # type: ignore[attr-defined]  # hypothesis's Random, typed as the module
    assert (
        match_calls(expected, actual, "subset").ok == match_calls(expected, shuffled, "subset").ok
    )


@given(call_lists, call_lists)
def test_dropping_arguments_from_what_is_expected_never_breaks_a_match(
    expected: list[ToolCall], actual: list[ToolCall]
) -> None:
    looser = [ToolCall(c.name) for c in expected]
    for mode in MODES:
        if match_calls(expected, actual, mode).ok:
            assert match_calls(looser, actual, mode).ok


@given(call_lists, st.data())
def test_any_subsequence_of_the_actual_calls_matches_in_order(
    actual: list[ToolCall], data: st.DataObject
) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(actual), max_size=len(actual)))
    expected = [c for c, k in zip(actual, keep, strict=True) if k]
    assert match_calls(expected, actual, "in_order").ok
