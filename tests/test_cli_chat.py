"""``mainspring chat`` through the real entry point on a pseudo-terminal, and from a pipe.

Each terminal test types at a real pty (pexpect) and waits for what the
program shows, every wait with its own timeout; nothing is timed. The default
agent is the offline demo wallet; ``tests.chat_agent:agent`` streams a slow
story to interrupt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mainspring.cli.commands import app
from tests.terminal import Start

pytestmark = [pytest.mark.timeout(240)]


def test_chat_streams_an_answer_after_a_spinner(terminal: Start) -> None:
    term = terminal("chat")
    term.wait_for("you> ")
    term.type("hello")
    before = term.wait_for("I can check your balance or pay a contact")
    assert "⠋" in before  # the spinner turned until the first token
    term.wait_for("turn complete (end_turn)")
    term.wait_for("you> ")
    term.child.sendeof()
    assert term.exit_code() == 0


def test_chat_approval_edits_a_modifiable_field(terminal: Start) -> None:
    term = terminal("chat")
    term.wait_for("you> ")
    term.type("Please pay Alice $120 for the concert tickets.")
    term.wait_for("approval needed")
    term.wait_for("may edit: amount_usd, memo")
    match = term.wait_for_pattern(r"session ([0-9a-f-]{36}) waits for your decision")
    assert "decide later" not in term.screen  # no store: nothing outlives this process
    assert match.group(1)
    term.wait_for("approve? ")
    term.type("e")
    term.wait_for("amount_usd [120.0]: ")
    term.type("15")
    term.wait_for('memo ["concert tickets"]: ')
    term.type("")  # Enter keeps it
    ran = term.wait_for("new balance is $235.00")
    assert '"amount_usd": 15.0, "memo": "concert tickets"' in ran
    term.wait_for("you> ")
    term.type("/exit")
    assert term.exit_code() == 0


def test_chat_reject_tells_the_model_the_reason(terminal: Start) -> None:
    term = terminal("chat")
    term.wait_for("you> ")
    term.type("Please pay Alice $120")
    term.wait_for("approve? ")
    term.type("/reject too much for tickets")
    shown = term.wait_for("did not go through: the user rejected this action: too much for tickets")
    assert "→ send_payment" not in shown
    term.wait_for("you> ")
    term.type("/approve")  # nothing waits any more: one line, the chat goes on
    term.wait_for("error: nothing waits for a decision")
    term.wait_for("you> ")
    term.child.sendeof()
    assert term.exit_code() == 0
    assert "Traceback" not in term.screen


@pytest.mark.slow
def test_chat_sessions_and_resume_with_a_sqlite_store(terminal: Start, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"  # four slashes: an absolute path
    first = terminal("chat", "--store", url)
    paused = first.wait_for_pattern(r"\(session ([0-9a-f-]{36})\)").group(1)
    first.wait_for("you> ")
    first.type("Please pay Alice $120")
    first.wait_for("approve? ")
    assert f"decide later: mainspring chat --store {url} --session {paused}" in first.screen
    first.child.sendeof()  # leave it waiting
    first.wait_for(f"session {paused} is kept (send_payment waits for a decision)")
    assert first.exit_code() == 0

    second = terminal("chat", "--store", url)
    fresh = second.wait_for_pattern(r"\(session ([0-9a-f-]{36})\)").group(1)
    second.wait_for("you> ")
    second.type("hello")
    second.wait_for("you> ")
    second.type("/sessions")
    listed = second.wait_for("you> ")
    assert paused in listed and f"{fresh}  (this one)" in listed
    second.type(f"/resume {paused}")
    second.wait_for(f"resumed session {paused}")
    second.wait_for("approval needed")
    second.wait_for("approve? ")
    second.type("y")
    second.wait_for("new balance is $130.00")
    second.wait_for("you> ")
    second.type("/resume no-such-session")
    second.wait_for("error: no stored session 'no-such-session'")
    second.wait_for("you> ")
    second.child.sendeof()
    assert second.exit_code() == 0
    assert "Traceback" not in first.screen + second.screen


def test_ctrl_c_mid_stream_cancels_and_the_next_message_works(
    terminal: Start,
) -> None:
    term = terminal("chat", "tests.chat_agent:agent")
    term.wait_for("you> ")
    term.type("tell me a story")
    term.wait_for("Once upon a time")
    term.child.sendintr()
    term.wait_for("turn complete (cancelled)")
    term.wait_for("you> ")
    term.type("are you still there?")
    term.wait_for("You said: are you still there?")
    term.wait_for("turn complete (end_turn)")
    term.wait_for("you> ")
    term.child.sendeof()
    assert term.exit_code() == 0
    assert "the end." not in term.screen


def test_ctrl_c_clears_a_typed_line_and_exits_on_an_empty_one(terminal: Start) -> None:
    term = terminal("chat", "tests.chat_agent:agent")
    term.wait_for("you> ")
    term.child.send("half a thought")
    term.wait_for("half a thought")  # readline has it
    term.child.sendintr()
    term.wait_for("you> ")  # a fresh prompt: the chat goes on
    term.child.sendintr()
    assert term.exit_code() == 130
    assert "You said" not in term.screen


def test_ctrl_d_exits_with_0(terminal: Start) -> None:
    term = terminal("chat", "tests.chat_agent:agent")
    term.wait_for("you> ")
    term.child.sendeof()
    assert term.exit_code() == 0


# --- without a terminal (typer's runner): the same REPL, read from a pipe -------------

runner = CliRunner(env={"COLUMNS": "200"})  # no wrapped lines to look across


def test_chat_from_a_pipe_shows_no_spinner_and_approves_inline() -> None:
    typed = "Please pay Alice $120\n/approve amount_usd=20 memo='two tickets'\n"
    result = runner.invoke(app, ["chat"], input=typed)
    assert result.exit_code == 0, result.output  # the input ended: like Ctrl-D
    assert not any(frame in result.output for frame in "⠋⠙⠹")
    assert '"amount_usd": 20.0, "memo": "two tickets"' in result.output
    assert "new balance is $230.00" in result.output


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["chat", "no_colon"], "package.module:attribute"),
        (["chat", "--session", "abc"], "--session needs --store"),
        (["chat", "--store", "bogus://x"], "unknown store URL"),
    ],
)
def test_chat_start_up_errors_are_one_line_and_exit_2(args: list[str], problem: str) -> None:
    result = runner.invoke(app, args, input="")
    assert result.exit_code == 2, result.output
    assert problem in result.output and "Traceback" not in result.output


def test_chat_errors_inside_are_one_line_and_the_chat_goes_on() -> None:
    typed = (
        "Please pay Alice $120\n"
        "/approve to_account=acct_mallory\n"  # not a modifiable field
        "/approve amount_usd=lots\n"  # not a number
        "/frobnicate\n"
        "maybe\n"  # neither y, n nor e
        "n\n"
    )
    result = runner.invoke(app, ["chat"], input=typed)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "are not modifiable" in out and "unknown command /frobnicate" in out
    assert "send_payment waits for a decision: y approves" in out
    assert "did not go through: the user rejected this action" in out
    assert "Traceback" not in out and "→ send_payment" not in out


def test_chat_continues_a_stored_session_only_with_its_own_agent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    first = runner.invoke(app, ["chat", "--store", url], input="Please pay Alice $120\n")
    assert first.exit_code == 0, first.output
    session_id = first.output.split("(session ")[1].split(")")[0]
    assert f"is kept (send_payment waits for a decision): mainspring chat --store {url}" in (
        first.output
    )
    wrong = runner.invoke(
        app, ["chat", "tests.chat_agent:agent", "--store", url, "--session", session_id], input=""
    )
    assert wrong.exit_code == 2, wrong.output
    assert "belongs to the agent 'wallet'; this chat runs 'echo'" in wrong.output
    again = runner.invoke(app, ["chat", "--store", url, "--session", session_id], input="y\n")
    assert again.exit_code == 0, again.output
    assert f"resumed session {session_id}" in again.output
    assert "new balance is $130.00" in again.output


def test_an_internal_error_inside_the_chat_is_one_line_unless_debug(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mainspring.session import Session

    def broken(self: Session, message: object = None, **kwargs: object) -> None:
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(Session, "send", broken)
    quiet = runner.invoke(app, ["chat"], input="hello\n/help\n")
    assert quiet.exit_code == 0, quiet.output
    assert "internal error: RuntimeError: the engine broke (--debug shows" in quiet.output
    assert "Traceback" not in quiet.output and "/sessions" in quiet.output  # it went on
    loud = runner.invoke(app, ["chat", "--debug"], input="hello\n")
    assert loud.exit_code == 0, loud.output
    assert "Traceback" in loud.output and "RuntimeError: the engine broke" in loud.output
