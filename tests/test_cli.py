"""The command line: the demo runs offline, asks for approval, fails cleanly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mainspring.cli import commands as cli
from mainspring.cli.commands import app

runner = CliRunner()


def test_demo_with_yes_streams_reads_asks_and_pays() -> None:
    result = runner.invoke(app, ["demo", "--yes"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "→ get_balance" in out and "→ lookup_contact" in out
    assert "approval needed" in out and "approved automatically" in out
    assert "→ send_payment" in out
    assert "new balance is $130.00" in out
    assert "turn complete (end_turn)" in out
    assert out.index("approval needed") < out.index("→ send_payment")


def test_demo_without_a_terminal_asks_for_yes_and_does_not_pay() -> None:
    result = runner.invoke(app, ["demo"], input="y\n")  # not a TTY: nobody to ask
    assert result.exit_code == 1
    assert "pass --yes" in result.output
    assert "→ send_payment" not in result.output


def test_demo_declined_at_the_prompt_does_not_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_interactive", lambda: True)
    result = runner.invoke(app, ["demo"], input="n\n")
    assert result.exit_code == 0, result.output
    assert "Approve?" in result.output
    assert "→ send_payment" not in result.output
    assert "did not go through: the user rejected this action" in result.output


def test_demo_approved_at_the_prompt_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_interactive", lambda: True)
    result = runner.invoke(app, ["demo"], input="y\n")
    assert result.exit_code == 0, result.output
    assert "→ send_payment" in result.output and "new balance is $130.00" in result.output


def test_demo_small_payment_runs_without_asking() -> None:
    result = runner.invoke(app, ["demo", "--message", "pay bob $5"])
    assert result.exit_code == 0, result.output
    assert "approval needed" not in result.output
    assert "new balance is $245.00" in result.output


def test_demo_reports_tool_errors_to_the_model() -> None:
    result = runner.invoke(app, ["demo", "-y", "-m", "pay zed $5"])
    assert result.exit_code == 0
    assert "couldn't find that contact" in result.output


def test_a_model_without_its_key_says_exactly_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = runner.invoke(app, ["demo", "--model", "anthropic:claude-sonnet-4-5"])
    assert result.exit_code == 2
    assert "needs ANTHROPIC_API_KEY" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["demo", "--model", "nope:model"])
    assert result.exit_code == 2 and "unknown model provider" in result.output


def test_version_and_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mainspring", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.startswith("mainspring ")


def test_demo_approval_can_come_from_a_later_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    first = runner.invoke(app, ["demo", "--store", url])  # no terminal: it pauses
    assert first.exit_code == 0, first.output
    assert "waiting for approval" in first.output and "→ send_payment" not in first.output
    session_id = first.output.split("--session")[-1].split()[0]
    later = subprocess.run(
        [
            sys.executable,
            "-m",
            "mainspring",
            "demo",
            "--store",
            url,
            "--session",
            session_id,
            "--yes",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert later.returncode == 0, later.stderr
    assert "→ send_payment" in later.stdout and "new balance is $130.00" in later.stdout


def test_unknown_store_url_is_a_clean_error() -> None:
    result = runner.invoke(app, ["demo", "--store", "bogus://x"])
    assert result.exit_code == 2  # a configuration error, as for every command
    assert "unknown store URL" in result.output and "Traceback" not in result.output


def test_a_missing_extra_prints_its_install_command_with_brackets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if the extra were not installed
    for name in [m for m in sys.modules if m.startswith("mainspring.models.anthropic")]:
        monkeypatch.delitem(sys.modules, name)
    result = runner.invoke(app, ["demo", "--model", "anthropic:claude-x"])
    assert result.exit_code == 2
    assert 'pip install "mainspring[anthropic]"' in result.output
    assert "Traceback" not in result.output


def test_a_pipeline_error_shows_no_markup(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pipeline", "run", str(tmp_path / "nowhere"), "--yes"])
    assert result.exit_code == 2  # a workspace that is not there: a usage error
    assert result.output.startswith("error: ") and "[red]" not in result.output
    assert "[/]" not in result.output and "Traceback" not in result.output


def test_help_shows_flags_as_flags_and_h_works() -> None:
    long = runner.invoke(app, ["demo", "--help"])
    short = runner.invoke(app, ["demo", "-h"])
    assert long.exit_code == short.exit_code == 0 and long.output == short.output
    assert "-y, --yes" in long.output and "<bool>" not in long.output


def test_a_paused_demo_prints_the_session_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--store", url])
    assert result.exit_code == 0
    session_id = result.output.split("--session")[-1].split()[0]
    assert f"(session {session_id})" in result.output


def test_an_in_memory_store_gets_no_continue_later_hint() -> None:
    result = runner.invoke(app, ["demo", "--store", "memory://"])
    assert result.exit_code == 0
    assert "(session " in result.output and "continue later" not in result.output
    assert "keeps no sessions beyond this process" in result.output


# --- mainspring run package.module:agent "message" ----------------------------------

AGENT_MODULE = '''
from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool

paid = []


@tool(permission="confirm")
def pay(to: str) -> str:
    """Pay someone."""
    paid.append(to)
    return f"paid {to}"


def answer(messages, tools):
    if messages[-1].role == "tool":
        return "Paid [bob] as asked."
    if "pay" in messages[-1].text:
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bob"})])
    return "Hello from your own agent."


def make_agent():
    return Agent(model=ScriptedModel(answer), tools=[pay])


agent = make_agent()
not_an_agent = 42
'''


@pytest.fixture
def own_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"own_agent_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_run_prints_the_answer_of_your_own_agent(own_agent: str) -> None:
    result = runner.invoke(app, ["run", f"{own_agent}:agent", "hi"])
    assert result.exit_code == 0, result.output
    assert "Hello from your own agent." in result.output


def test_run_takes_a_factory_and_prints_json_lines(own_agent: str) -> None:
    from mainspring.codec import event_from_json
    from mainspring.testing import check_events

    result = runner.invoke(app, ["run", f"{own_agent}:make_agent", "hi", "--json"])
    assert result.exit_code == 0, result.output
    events = [event_from_json(line) for line in result.stdout.splitlines() if line.strip()]
    check_events(events)
    assert events[-1].type == "turn_complete"


def test_run_pauses_with_exit_3_and_the_session_id(own_agent: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    paused = runner.invoke(app, ["run", f"{own_agent}:agent", "pay bob", "--store", url])
    assert paused.exit_code == 3, paused.output
    assert "waiting for a decision on pay" in paused.output
    session_id = paused.output.split("--session")[-1].split()[0]
    done = runner.invoke(
        app, ["run", f"{own_agent}:agent", "--store", url, "--session", session_id, "--yes"]
    )
    assert done.exit_code == 0, done.output
    assert "Paid [bob] as asked." in done.output  # brackets kept


def test_run_with_yes_approves_and_completes(own_agent: str) -> None:
    result = runner.invoke(app, ["run", f"{own_agent}:agent", "pay bob", "--yes"])
    assert result.exit_code == 0, result.output
    assert "→ pay" in result.output and "Paid [bob] as asked." in result.output


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("no_colon", "package.module:attribute"),
        ("no_such_module_xyz:agent", "cannot import"),
        ("{mod}:missing", "has no attribute"),
        ("{mod}:not_an_agent", "not an Agent"),
    ],
)
def test_a_bad_agent_string_is_one_line_and_exit_2(own_agent: str, spec: str, problem: str) -> None:
    result = runner.invoke(app, ["run", spec.format(mod=own_agent), "hi"])
    assert result.exit_code == 2
    assert problem in result.output and "Traceback" not in result.output


def test_an_internal_error_is_one_line_unless_debug(
    own_agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(cli, "_run_agent", broken)
    quiet = runner.invoke(app, ["run", f"{own_agent}:agent", "hi"])
    assert quiet.exit_code == 1
    assert "internal error: RuntimeError: the engine broke" in quiet.output
    assert "Traceback" not in quiet.output
    loud = runner.invoke(app, ["run", f"{own_agent}:agent", "hi", "--debug"])
    assert loud.exit_code == 1
    assert "Traceback" in loud.output and "RuntimeError: the engine broke" in loud.output


def test_sessions_list_show_delete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    paused = runner.invoke(app, ["demo", "--store", url])
    session_id = paused.output.split("--session")[-1].split()[0]
    listed = runner.invoke(app, ["sessions", "list", "--store", url])
    assert listed.exit_code == 0 and listed.output.split() == [session_id]
    shown = runner.invoke(app, ["sessions", "show", session_id, "--store", url])
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.output)
    assert summary["pending"]["tool"] == "send_payment" and summary["agent"] == "wallet"
    gone = runner.invoke(app, ["sessions", "delete", session_id, "--store", url])
    assert gone.exit_code == 0
    assert runner.invoke(app, ["sessions", "list", "--store", url]).output == ""
    missing = runner.invoke(app, ["sessions", "show", session_id, "--store", url])
    assert missing.exit_code == 2 and "no stored session" in missing.output


def test_sessions_on_a_store_without_sessions_is_one_line() -> None:
    result = runner.invoke(app, ["sessions", "list", "--store", "bogus://x"])
    assert result.exit_code == 2 and "unknown store URL" in result.output
    assert "Traceback" not in result.output


def test_a_busy_port_is_one_line() -> None:
    import socket

    pytest.importorskip("mcp", reason='needs mcp (pip install -e ".[test]")')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["mcp", "serve", "--http", "--port", str(port)])
    assert result.exit_code == 2  # the fix is on the command line: another --port
    assert f"127.0.0.1:{port} is in use" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        ["run"],
        ["chat"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["sessions", "delete"],
        ["mcp", "serve"],
        ["pipeline", "run"],
        ["report"],
    ],
)
def test_every_command_that_can_fail_takes_debug(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "--debug" in result.output


def test_debug_adds_the_traceback_to_the_same_one_line_and_exit_code() -> None:
    quiet = runner.invoke(app, ["sessions", "list", "--store", "bogus://x"])
    loud = runner.invoke(app, ["sessions", "list", "--store", "bogus://x", "--debug"])
    assert quiet.exit_code == loud.exit_code == 2
    assert "Traceback" not in quiet.output and "Traceback" in loud.output
    assert "error: unknown store URL" in quiet.output and "error: unknown store URL" in loud.output


def test_an_internal_error_in_the_demo_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the demo broke")

    monkeypatch.setattr(cli, "_run_demo", broken)
    result = runner.invoke(app, ["demo", "--yes"])
    assert result.exit_code == 1
    assert "internal error: RuntimeError: the demo broke (--debug shows" in result.output
    assert "Traceback" not in result.output


def test_a_non_utf8_file_is_one_line_naming_it(tmp_path: Path) -> None:
    """A file the CLI reads that is not UTF-8 text: one line that names it, no traceback."""
    workspace = tmp_path / "pipe"
    shutil.copytree(Path(__file__).parents[1] / "examples" / "blog-pipeline", workspace)
    contract = sorted(workspace.glob("stages/*/CONTEXT.md"))[0]
    contract.write_bytes(contract.read_bytes() + b"\xff\xfe not text")
    result = runner.invoke(app, ["pipeline", "run", str(workspace), "--yes"])
    assert result.exit_code == 2
    assert "CONTEXT.md is not UTF-8 text" in result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    log = tmp_path / "tokens.jsonl"
    log.write_bytes(b"\xff\xfe{}\n")
    report = runner.invoke(app, ["report", str(log), "-o", str(tmp_path / "r.html")])
    assert report.exit_code != 0 and "tokens.jsonl" in report.output
    assert "Traceback" not in report.output
