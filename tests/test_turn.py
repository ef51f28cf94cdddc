"""The turn owns its transitions: every verb checks where the turn is, from one table.

A hypothesis state machine drives a session's turn through random legal and
illegal transitions. A legal one moves as the model below says; an illegal
one raises :class:`IllegalTransition` and leaves the state exactly as it was.
The ledger likewise moves only along :data:`LEDGER`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mainspring.events import PendingAction, TurnComplete
from mainspring.messages import Message, ToolResultPart
from mainspring.state import (
    LEDGER,
    TRANSITIONS,
    Call,
    IllegalTransition,
    SessionState,
    Turn,
    WriteRecord,
)
from mainspring.usage import Usage

VERBS = (
    "start_turn",
    "begin_step",
    "add_call",
    "answered",
    "cut_answer",
    "advance",
    "pause",
    "unpause",
    "repause",
    "commit_step",
    "charge",
    "refuse_output",
    "finish_turn",
)

LedgerStatus = Literal["started", "done", "unknown"]


def _pending(turn: Turn) -> PendingAction:
    call = turn.calls[turn.position] if turn.position < len(turn.calls) else None
    return PendingAction(
        attempt_id=f"attempt-{turn.index}-{turn.position}",
        tool_use_id=call.id if call is not None else "none",
        turn_index=turn.index,
        name=call.name if call is not None else "none",
        input={},
        description="",
    )


def _result(call: Call) -> ToolResultPart:
    return ToolResultPart(tool_use_id=call.id, name=call.name, content="ok")


def _snapshot(state: SessionState) -> SessionState:
    return copy.deepcopy(state)


class TurnMachine(RuleBasedStateMachine):
    """A session's turn and ledger under random verbs."""

    def __init__(self) -> None:
        super().__init__()
        self.state = SessionState(session_id="s", agent_name="a")
        self.calls_made = 0

    # ------------------------------------------------------------ helpers

    @property
    def where(self) -> str | None:
        turn = self.state.turn
        return None if turn is None else turn.status

    @property
    def turn(self) -> Turn:
        turn = self.state.turn
        assert turn is not None
        return turn

    def refused(self, action: Callable[[], object]) -> None:
        """``action`` is illegal here: it raises and changes nothing."""
        before = _snapshot(self.state)
        with pytest.raises(IllegalTransition):
            action()
        assert self.state == before

    def legal(self, verb: str) -> bool:
        """Whether ``verb`` may run now (the table, plus the verb's own condition)."""
        turn = self.state.turn
        where = None if turn is None else turn.status
        if turn is None and verb not in ("start_turn", "finish_turn"):
            return False
        if where not in TRANSITIONS[verb]:
            return False
        if turn is None:
            return True
        within = turn.position < len(turn.calls)
        return {
            "start_turn": not turn.calls,
            "begin_step": not turn.calls,
            "advance": within,
            "pause": within,
            "repause": within,
            "unpause": turn.pending is not None,
            "commit_step": all(c.result is not None for c in turn.calls),
        }.get(verb, True)

    def attempt(self, verb: str, action: Callable[[], object]) -> bool:
        """Run ``action`` if ``verb`` is legal now; else see it refused. Whether it ran."""
        if self.legal(verb):
            action()
            return True
        if self.state.turn is None and verb not in ("start_turn", "finish_turn"):
            return False  # (a turn's verb needs a turn to call it on)
        self.refused(action)
        return False

    # -------------------------------------------------------------- rules

    @rule()
    def start_turn(self) -> None:
        index = self.state.turn_index
        if self.attempt("start_turn", self.state.start_turn):
            assert self.turn.index == index + 1 == self.state.turn_index
            assert self.turn.status == "streaming" and self.turn.steps == 0

    @rule()
    def begin_step(self) -> None:
        steps = self.state.turn.steps if self.state.turn else 0
        if self.state.turn is not None and self.attempt("begin_step", self.turn.begin_step):
            assert self.turn.steps == steps + 1 and self.turn.position == 0

    @rule(index=st.integers(0, 5))
    def add_call(self, index: int) -> None:
        if self.state.turn is None:
            return
        self.calls_made += 1
        call = Call(id=f"call-{self.calls_made}", index=index, name="tool")
        count = len(self.turn.calls)
        if self.attempt("add_call", lambda: self.turn.add_call(call)):
            assert len(self.turn.calls) == count + 1

    @rule()
    def answered(self) -> None:
        if self.state.turn is not None and self.attempt("answered", self.turn.answered):
            calls = self.turn.calls
            assert [c.index for c in calls] == sorted(c.index for c in calls)
            assert self.turn.status == ("executing" if calls else "streaming")

    @rule()
    def cut_answer(self) -> None:
        if self.state.turn is not None and self.attempt("cut_answer", self.turn.cut_answer):
            assert self.turn.calls == [] and self.turn.status == "streaming"

    @rule(settle=st.booleans())
    def advance(self, settle: bool) -> None:
        if self.state.turn is None:
            return
        turn = self.turn
        if settle and turn.status == "executing" and turn.position < len(turn.calls):
            call = turn.calls[turn.position]
            call.result = _result(call)  # (the dispatcher records it, then advances)
        position = turn.position
        if self.attempt("advance", turn.advance):
            assert turn.position == position + 1

    @rule()
    def pause(self) -> None:
        if self.state.turn is None:
            return
        pending = _pending(self.turn)
        if self.attempt("pause", lambda: self.turn.pause(pending)):
            assert self.turn.status == "paused" and self.turn.pending is pending

    @rule()
    def unpause(self) -> None:
        if self.state.turn is None:
            return
        pending = self.turn.pending
        got: list[PendingAction] = []
        if self.attempt("unpause", lambda: got.append(self.turn.unpause())):
            assert got == [pending] and self.turn.status == "executing"
            assert self.turn.pending is None

    @rule()
    def repause(self) -> None:
        if self.state.turn is None:
            return
        pending = _pending(self.turn)
        if self.attempt("repause", lambda: self.turn.repause(pending)):
            assert self.turn.status == "paused" and self.turn.pending is pending

    @rule(fill=st.booleans())
    def commit_step(self, fill: bool) -> None:
        if self.state.turn is None:
            return
        turn = self.turn
        if fill and turn.status == "executing":
            for call in turn.calls:
                call.result = call.result or _result(call)
        expected = [c.result for c in turn.calls]
        got: list[list[ToolResultPart]] = []
        if self.attempt("commit_step", lambda: got.append(turn.commit_step())):
            assert got == [expected]
            assert turn.status == "streaming" and turn.calls == [] and turn.position == 0

    @rule(usd=st.floats(0, 1), tokens=st.none() | st.integers(0, 100))
    def charge(self, usd: float, tokens: int | None) -> None:
        if self.state.turn is None:
            return
        usage = None if tokens is None else Usage(input_tokens=tokens)
        before_usd, before_usage = self.turn.cost_usd, self.turn.usage
        if self.attempt("charge", lambda: self.turn.charge(usd, usage)):
            assert self.turn.cost_usd == before_usd + usd
            expected = before_usage if usage is None else before_usage + usage
            assert self.turn.usage == expected

    @rule()
    def refuse_output(self) -> None:
        if self.state.turn is None:
            return
        before = self.turn.output_retries
        if self.attempt("refuse_output", self.turn.refuse_output):
            assert self.turn.output_retries == before + 1

    @rule()
    def finish_turn(self) -> None:
        where = self.where
        self.attempt("finish_turn", self.state.finish_turn)
        if where == "paused":
            assert self.where == "paused"  # kept: it waits for its decision
        else:
            assert self.state.turn is None

    # ------------------------------------------------------------- ledger

    @precondition(lambda self: self.calls_made > 0)
    @rule(
        which=st.integers(1, 50),
        status=st.sampled_from(["started", "done", "unknown"]),
    )
    def ledger(self, which: int, status: LedgerStatus) -> None:
        key = f"call-{(which - 1) % self.calls_made + 1}"
        before = self.state.writes.get(key)
        record = WriteRecord(key=key, tool="tool", status=status)
        if record.status in LEDGER[None if before is None else before.status]:
            self.state.ledger(record)
            assert self.state.writes[key] is record
        else:
            self.refused(lambda: self.state.ledger(record))

    # --------------------------------------------------------- invariants

    @invariant()
    def paused_iff_pending(self) -> None:
        turn = self.state.turn
        if turn is not None:
            assert (turn.status == "paused") == (turn.pending is not None)
            assert self.state.pending is turn.pending

    @invariant()
    def position_within_calls(self) -> None:
        turn = self.state.turn
        if turn is not None:
            assert 0 <= turn.position <= len(turn.calls)
            if turn.status == "streaming":
                assert turn.position == 0

    @invariant()
    def ledger_entries_are_known_statuses(self) -> None:
        for key, record in self.state.writes.items():
            assert record.key == key and record.status in ("started", "done", "unknown")


TestTurnMachine = TurnMachine.TestCase
TestTurnMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_the_table_names_every_verb_and_only_real_states() -> None:
    assert set(TRANSITIONS) == set(VERBS)
    states = {None, "streaming", "executing", "paused"}
    for verb, prior in TRANSITIONS.items():
        assert prior and prior <= states, verb
    assert set(LEDGER) == {None, "started", "done", "unknown"}


def test_a_ledger_entry_never_moves_back() -> None:
    state = SessionState(session_id="s", agent_name="a")
    state.ledger(WriteRecord(key="c", tool="t", status="started"))
    state.ledger(WriteRecord(key="c", tool="t", status="started"))  # a suspended write again
    state.ledger(WriteRecord(key="c", tool="t", status="done"))
    for status in ("started", "unknown", "done"):
        with pytest.raises(IllegalTransition, match="done -> "):
            state.ledger(WriteRecord(key="c", tool="t", status=status))
    assert state.writes["c"].status == "done"
    with pytest.raises(IllegalTransition, match="None -> unknown"):
        state.ledger(WriteRecord(key="d", tool="t", status="unknown"))
    assert "d" not in state.writes


@given(st.lists(st.sampled_from(VERBS), max_size=12))
def test_no_verb_is_legal_on_a_state_without_a_turn_but_the_two_of_the_session(
    verbs: list[str],
) -> None:
    state = SessionState(session_id="s", agent_name="a")
    for verb in verbs:
        if verb in ("start_turn", "finish_turn"):
            continue
        assert None not in TRANSITIONS[verb]
    state.finish_turn()  # nothing to finish: nothing changes
    assert state.turn is None and state.turn_index == 0


def test_a_follow_up_turn_starts_from_an_answered_turn_only() -> None:
    state = SessionState(session_id="s", agent_name="a")
    first = state.start_turn()
    first.begin_step()
    first.answered()  # no calls: the answer ended the turn's step
    second = state.start_turn()  # a follow-up message starts the next turn
    assert (first.index, second.index, state.turn) == (1, 2, second)
    second.begin_step()
    second.add_call(Call(id="c", index=0, name="t"))
    second.answered()
    with pytest.raises(IllegalTransition, match=r"start_turn\(\) from executing"):
        state.start_turn()
    assert state.turn is second and state.turn_index == 2


def test_a_replace_of_a_turn_keeps_its_verbs_honest() -> None:
    """A decoded or copied turn is checked like a live one."""
    turn = replace(Turn(index=1), status="paused")
    with pytest.raises(IllegalTransition, match="no pending action"):
        turn.unpause()
    assert turn.status == "paused"


def test_the_session_verbs_write_what_they_name() -> None:
    state = SessionState(session_id="s", agent_name="a")
    terminal = TurnComplete(stop_reason="end_turn", turn_index=1, usage=Usage(), cost_usd=0.0)

    def streams() -> tuple[object, ...]:
        return state.active_stream, state.last_stream, state.last_terminal

    state.begin_stream("st-1")
    assert streams() == ("st-1", None, None)
    state.end_stream("st-1", terminal)
    assert streams() == (None, "st-1", terminal)
    state.begin_stream("st-2")
    state.clear_stream()  # ended without a terminal: the last one stands
    assert streams() == (None, "st-1", terminal)

    state.note_decision("att", "approved")
    state.forget_decision("att")
    state.forget_decision("att")  # (given back twice: nothing to give)
    assert state.decided == {}

    used = Usage(input_tokens=3)
    state.set_totals(0.5, used)
    state.set_totals(0.75)  # a tool's spend: the model usage stands
    assert (state.cost_usd, state.usage) == (0.75, used)
    state.set_auto_spent(2.0)
    state.raise_floor(auto_spent_usd=1.0, cost_usd=1.0)  # lower than ours: kept
    assert (state.auto_spent_usd, state.cost_usd) == (2.0, 1.0)

    transcript = [Message.user("hi")]
    state.bind_messages(transcript)
    assert state.messages is transcript
