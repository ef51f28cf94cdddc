"""``mainspring eval run|diff``: tables, files, and exit codes CI can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mainspring.cli.commands import app
from mainspring.evals import EvalReport

ROOT = Path(__file__).resolve().parent.parent
FINANCE = ROOT / "examples" / "finance" / "evals" / "finance.yaml"
runner = CliRunner()

WALLET = """
name: wallet
agent: tests.evals.agents:wallet_agent
cases:
  - name: pay
    input: Pay Alice $20
    approve: all
    steps:
      - calls: [balance, {pay: {to: alice, amount_usd: 20}}]
      - Paid.
    expect:
      - contains: Paid
      - approvals: {asked: [pay], approved: [pay]}
  - name: hello
    input: Hi
    steps: [Hello.]
    expect:
      - equals: Hello.
"""


def write(tmp_path: Path, text: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_finance_suite_passes_offline_through_the_command_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [
                str(ROOT / "src"),
                str(ROOT / "examples" / "finance"),
                os.environ.get("PYTHONPATH", ""),
            ]
        ),
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mainspring",
            "eval",
            "run",
            str(FINANCE),
            "--json",
            str(tmp_path / "finance.json"),
            "--html",
            str(tmp_path / "finance.html"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    report = EvalReport.read(tmp_path / "finance.json")
    assert report.total >= 10 and report.ok
    assert report.agent == "mainspring_finance:finance_agent"
    facts = {r.case: r for r in report.results}
    assert any(r.approved for r in facts.values()) and any(r.rejected for r in facts.values())
    assert any(r.blocked for r in facts.values())
    assert any(r.stop_reason == "budget_exceeded" for r in facts.values())
    assert f"{report.total}/{report.total} passed" in out.stdout
    assert "<table>" in (tmp_path / "finance.html").read_text()


def test_run_exits_1_when_a_case_fails_and_says_why(tmp_path: Path) -> None:
    text = WALLET.replace("equals: Hello.", "equals: Goodbye.")
    result = runner.invoke(
        app, ["eval", "run", str(write(tmp_path, text)), "--json", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 1, result.output
    assert "FAIL hello [rep 0]: equals: expected 'Goodbye.', got 'Hello.'" in result.output
    assert "1/2 passed" in result.output
    assert not EvalReport.read(tmp_path / "r.json").ok


def test_run_with_repetitions_and_an_agent_option(tmp_path: Path) -> None:
    text = WALLET.replace("agent: tests.evals.agents:wallet_agent\n", "")
    path = write(tmp_path, text)
    missing = runner.invoke(app, ["eval", "run", str(path)])
    assert missing.exit_code == 2 and "names no agent: give --agent" in missing.output
    result = runner.invoke(
        app,
        [
            "eval",
            "run",
            str(path),
            "--agent",
            "tests.evals.agents:wallet_agent",
            "--repeat",
            "3",
            "--concurrency",
            "2",
            "--json",
            str(tmp_path / "r.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "6/6 passed" in result.output
    assert EvalReport.read(tmp_path / "r.json").repeat == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "run", "nope.yaml"], "nope.yaml: no such file"),
        (["eval", "run", "{bad}"], "case 'pay', approve: Input should be 'all' or 'none'"),
        (["eval", "run", "{good}", "--agent", "nowhere:agent"], "cannot import 'nowhere:agent'"),
        (["eval", "run", "{good}", "--agent", "os:getcwd"], "os:getcwd made a str, not an Agent"),
        (
            ["eval", "run", "{good}", "--agent", "json:dumps"],
            "calling json:dumps failed: TypeError",
        ),
        (["eval", "run", "{good}", "--agent", "json:__name__"], "not an Agent or a factory"),
        (["eval", "run", "{good}", "--concurrency", "0"], "--concurrency"),
        (["eval", "run", "{good}", "--judge-model", "nope:x"], "unknown model provider"),
    ],
)
def test_run_usage_mistakes_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    good = write(tmp_path, WALLET)
    bad = write(tmp_path, WALLET.replace("approve: all", "approve: maybe"), "bad.yaml")
    args = [a.format(good=good, bad=bad) for a in args]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_diff_exit_codes_follow_regressions(tmp_path: Path) -> None:
    good = write(tmp_path, WALLET)
    worse = write(tmp_path, WALLET.replace("equals: Hello.", "equals: Goodbye."), "worse.yaml")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert runner.invoke(app, ["eval", "run", str(good), "--json", str(a)]).exit_code == 0
    assert runner.invoke(app, ["eval", "run", str(worse), "--json", str(b)]).exit_code == 1
    same = runner.invoke(app, ["eval", "diff", str(a), str(a)])
    assert same.exit_code == 0 and "0 regressions" in same.output
    regressed = runner.invoke(app, ["eval", "diff", str(a), str(b)])
    assert regressed.exit_code == 1, regressed.output
    assert "regressed" in regressed.output and "1 regression" in regressed.output
    assert "-1.00" in regressed.output  # hello's score fell from 1 to 0
    fixed = runner.invoke(app, ["eval", "diff", str(b), str(a)])
    assert fixed.exit_code == 0 and "fixed" in fixed.output


def test_diff_of_a_file_that_is_not_results_exits_2(tmp_path: Path) -> None:
    results = tmp_path / "a.json"
    results.write_text(json.dumps({"dataset": "d", "results": []}))
    broken = write(tmp_path, "{not json", "b.json")
    for args in ([str(results), str(broken)], [str(results), str(tmp_path / "none.json")]):
        result = runner.invoke(app, ["eval", "diff", *args])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output


def test_the_command_line_does_not_import_evals_until_it_runs() -> None:
    code = "import sys, mainspring.cli.commands; print('mainspring.evals' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False"]
