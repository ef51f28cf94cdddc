"""The command line: the demo runs offline, asks for approval, fails cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mainspring import cli
from mainspring.cli import app

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
    assert result.exit_code == 1
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
    assert result.exit_code == 1
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
    assert "does not outlive this process" in result.output
