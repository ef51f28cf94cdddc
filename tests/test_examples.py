"""The examples gallery runs: every example does what its README promises, offline.

Each example runs as a user runs it, ``python examples/<name>/main.py``, in a
subprocess whose working directory is a temporary folder (so an example that
writes files writes them there). Provider keys are removed from its
environment: an example that tried a real model would fail here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GALLERY = ROOT / "docs" / "examples.md"
TIMEOUT = 150  # seconds for one example's process (the MCP one starts two servers)


def offline_env() -> dict[str, str]:
    """This environment without provider credentials, nor the suite's own pytest options."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_AUTH_TOKEN")) and k != "PYTEST_ADDOPTS"
    }


def run(
    command: list[str], cwd: Path, *, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; fail the test (with its output) unless it exits 0."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=offline_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done


def run_example(name: str, cwd: Path, *args: str) -> str:
    """``python examples/<name>/main.py ARGS`` from ``cwd``: its standard output."""
    return run([sys.executable, str(EXAMPLES / name / "main.py"), *args], cwd).stdout


def test_approvals(tmp_path: Path) -> None:
    out = run_example("approvals", tmp_path)
    check_documented("approvals", out)
    assert "waiting: send_payment({'to': 'alice', 'amount_usd': 120.0})" in out
    assert "payments so far: []" in out, "nothing runs before the decision"
    assert "approved with an edit -> ['sent $100.00 to alice']" in out
    assert "refused (DecisionConflict)" in out
    assert "an edit of 'to' is refused" in out
    assert "denied; the model answered: Understood: I did not pay Mallory." in out
    assert out.rstrip().endswith(
        "payments that ran: ['alice $100.00'] (exactly once, at the approved amount)"
    )


def test_durable_resume_continues_in_another_process(tmp_path: Path) -> None:
    out = run_example("durable-resume", tmp_path)
    check_documented("durable-resume", out)
    steps = re.findall(r"^\$ main\.py (\w+)$", out, flags=re.MULTILINE)
    assert steps == ["ask", "approve", "replay"]
    assert "paused for approval of pay {'to': 'bob', 'amount_usd': 5.0}" in out
    assert "loaded; still waiting: pay {'to': 'bob', 'amount_usd': 5.0}" in out
    assert "approved and ran: sent $5.00 to bob" in out
    replayed = re.search(r"^replayed (\d+) events: (.*)$", out, flags=re.MULTILINE)
    assert replayed is not None, out
    kinds = replayed.group(2).split()
    assert int(replayed.group(1)) == len(kinds)
    assert kinds[0] == "stream_started"
    assert kinds[-1] == "turn_complete"
    assert "tool_result" in kinds
    assert "payments made across three processes: ['bob 5.00'] (the write ran once)" in out


def test_durable_resume_steps_run_by_hand(tmp_path: Path) -> None:
    """The README's three commands, each a process of its own, on one database file."""
    main = str(EXAMPLES / "durable-resume" / "main.py")
    asked = run([sys.executable, main, "ask", "--db", "agent.db"], tmp_path).stdout
    session = re.search(r"^session=(\S+)$", asked, flags=re.MULTILINE)
    assert session is not None, asked
    approved = run(
        [sys.executable, main, "approve", "--db", "agent.db", "--session", session.group(1)],
        tmp_path,
    ).stdout
    stream = re.search(r"^stream=(\S+)$", approved, flags=re.MULTILINE)
    assert stream is not None, approved
    command = [sys.executable, main, "replay", "--db", "agent.db"]
    replayed = run([*command, "--session", session.group(1), "--stream", stream.group(1)], tmp_path)
    assert "stream_started" in replayed.stdout
    assert (tmp_path / "agent.payments").read_text() == "bob 5.00\n"
    # A second approval in yet another process finds nothing waiting, and pays nobody.
    again = subprocess.run(
        [sys.executable, main, "approve", "--db", "agent.db", "--session", session.group(1)],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert again.returncode != 0
    assert "has nothing waiting for a decision" in again.stderr
    assert (tmp_path / "agent.payments").read_text() == "bob 5.00\n"


def test_web_approvals(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    out = run_example("web-approvals", tmp_path)
    check_documented("web-approvals", out)
    first, second = re.findall(r"^events: (.*)$", out, flags=re.MULTILINE)
    assert first.split()[0] == "stream_started"
    assert first.split()[-2:] == ["pending_action", "turn_complete"]
    assert "approval needed: send_payment {'to': 'alice', 'amount_usd': 20.0}" in out
    assert "tool result: sent $15.00 to alice" in out
    assert second.split()[-1] == "turn_complete"
    assert "pending_action" not in second
    assert "the same approval posted again: HTTP 409" in out
    assert "a forged approval id: HTTP 403" in out
    assert "no key: HTTP 401" in out
    assert "payments that ran: ['alice $15.00']" in out


def test_token_accounting(tmp_path: Path) -> None:
    out = run_example("token-accounting", tmp_path, "--out", "token-report")  # as its README
    check_documented("token-accounting", out)
    calls = out.split("\ncall ")[1:]
    assert len(calls) == 2
    first, second = calls
    for source in ("tools", "system", "context", "memory", "user"):
        assert re.search(rf"^  {source} ", first, flags=re.MULTILINE), (source, first)
    assert re.search(r"^  tool_result ", second, flags=re.MULTILINE)
    assert "0 cache read, 67 cache write" in first
    assert "67 cache read, 0 cache write" in second and "cache hit rate 14%" in second
    assert "(configured prices)" in first
    shares = [float(s) for s in re.findall(r"(\d+\.\d)%$", second, flags=re.MULTILINE)]
    assert sum(shares) == pytest.approx(100, abs=0.5)
    assert "turn total: 611 tokens, $0.002110" in out
    html = (tmp_path / "token-report" / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "Token accounting example" in html
    lines = (tmp_path / "token-report" / "tokens.jsonl").read_text().splitlines()
    kinds = [json.loads(line).get("type", "turn") for line in lines]
    assert kinds == ["turn", "session_summary"], "one turn's snapshot, then the session's summary"


def test_mcp_tools(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("mcp_server_time")
    out = run_example("mcp-tools", tmp_path)
    check_documented("mcp-tools", out)
    assert "mcp__time__get_current_time: read (annotations: readOnlyHint)" in out
    assert "mcp__shop__stock: read (annotations: readOnlyHint)" in out
    assert "mcp__shop__order" not in out, "a confirm-tier tool is not served by default"
    assert '"timezone": "UTC"' in out
    assert '"datetime": "' in out
    assert "T21:00:00+09:00" in out, "noon UTC converted to Tokyo by the real server"
    assert "mcp__shop__stock ->\nA1: 3 in stock" in out
    results = re.findall(r"^(\S+) ->$", out, flags=re.MULTILINE)
    assert results == [
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
        "mcp__shop__stock",
    ], "three calls in parallel, their results in the model's order"
    assert "the model said: Noon UTC is 21:00 in Tokyo." in out


def test_testing_an_agent_main(tmp_path: Path) -> None:
    out = run_example("testing-an-agent", tmp_path)
    check_documented("testing-an-agent", out)
    assert "waiting for approval: refund {'order_id': 'A1', 'amount_usd': 40.0}" in out
    assert "refunds: [('A1', 40.0)]; the agent said: Refunded order A1." in out


def test_testing_an_agent_tests_pass(tmp_path: Path) -> None:
    """The example's own test file passes under pytest, run as its README says."""
    test_file = EXAMPLES / "testing-an-agent" / "test_agent.py"
    done = run(
        # (the repository's own addopts, e.g. for parallel runs, are not the example's)
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            str(test_file),
        ],
        ROOT,
        timeout=300,
    )
    # The summary line says how many passed, and nothing else (no failed, no errors).
    summary = done.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"(\d+) passed in [\d.]+s", summary)
    assert found is not None, done.stdout
    assert int(found.group(1)) == len(re.findall(r"^async def test_", test_file.read_text(), re.M))


def test_workspace_tools(tmp_path: Path) -> None:
    out = run_example("workspace-tools", tmp_path)
    check_documented("workspace-tools", out)
    assert "refused: tool 'read_file' failed: WorkspaceError: '../outside.txt'" in out
    assert "read: greet.py: lines 1-2 of 2" in out
    assert "apply_patch waits for approval:" in out
    assert '-    return "hello " + name\n+    return f"hello, {name}!"' in out
    assert out.endswith(
        'after approval, greet.py is:\ndef greet(name):\n    return f"hello, {name}!"\n'
    )


def test_engine_multi_agent(tmp_path: Path) -> None:
    out = run_example("engine-multi-agent", tmp_path)
    check_documented("engine-multi-agent", out)
    assert "bob may see: ['front_desk'] []" in out, "private members are not listed"
    assert "bob runs the private researcher: refused" in out
    assert "alice's run waits: refund {'order': 'A1'}" in out
    assert "bob cannot decide alice's refund (UnknownAttempt)" in out
    assert "alice approves: Your refund is on its way." in out
    assert "the researcher saw ['user:bob: B7 (a chair)']" in out, "the caller reached the tool"
    assert out.rstrip().endswith("refunds: ['A1 for user:alice']")


def test_blog_pipeline(tmp_path: Path) -> None:
    """Its README's command, on a copy (the pipeline writes into its stage folders)."""
    workspace = tmp_path / "blog-pipeline"
    shutil.copytree(EXAMPLES / "blog-pipeline", workspace)
    done = run(
        [sys.executable, "-m", "mainspring", "pipeline", "run", str(workspace), "--yes"], tmp_path
    )
    assert "stage 03_polish complete" in done.stdout
    for artifact in (
        "01_research/output/notes.md",
        "02_draft/output/draft.md",
        "03_polish/output/post.md",
    ):
        assert (workspace / "stages" / artifact).read_text().strip(), artifact


def test_finance(tmp_path: Path) -> None:
    out = run_example("finance", tmp_path)
    check_documented("finance", out)
    assert "waiting: swap on quote q1" in out
    assert "balances so far: {'checking': 2400.0, 'savings': 8000.0}" in out, "nothing ran yet"
    assert "refreshed: swap on quote q2" in out
    assert "an approval of the old quote is refused (InputChanged)" in out
    assert out.rstrip().endswith("balances now: {'checking': 2100.0, 'savings': 8000.0}")


@pytest.mark.parametrize("name", ["approvals", "token-accounting", "mcp-tools", "testing-an-agent"])
def test_a_real_model_without_its_key_is_a_one_line_usage_error(name: str, tmp_path: Path) -> None:
    """``--model`` takes a model string; a missing key says so (exit 2), and nothing runs."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name / "main.py"), "--model", "openai:gpt-4.1"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "main.py: error: openai:gpt-4.1 needs OPENAI_API_KEY in the environment"
    )
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


TESTED: dict[str, Callable[[Path], None]] = {
    "approvals": test_approvals,
    "durable-resume": test_durable_resume_continues_in_another_process,
    "web-approvals": test_web_approvals,
    "token-accounting": test_token_accounting,
    "mcp-tools": test_mcp_tools,
    "testing-an-agent": test_testing_an_agent_tests_pass,
    "workspace-tools": test_workspace_tools,
    "engine-multi-agent": test_engine_multi_agent,
    "blog-pipeline": test_blog_pipeline,
    "finance": test_finance,
}
"""Each example folder and the test that runs it."""

FOLDERS = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_every_example_is_tested() -> None:
    assert sorted(TESTED) == FOLDERS


@pytest.mark.parametrize("name", FOLDERS)
def test_every_example_has_a_readme_and_a_gallery_section(name: str) -> None:
    readme = EXAMPLES / name / "README.md"
    assert readme.is_file(), f"examples/{name} has no README.md"
    text = readme.read_text()
    if (EXAMPLES / name / "main.py").is_file():
        assert f"python examples/{name}/main.py" in text, "the README says how to run it"
    gallery = GALLERY.read_text()
    assert f"`examples/{name}/`" in gallery, f"docs/examples.md does not show examples/{name}"


def test_the_gallery_links_nothing_outside_the_docs() -> None:
    """mkdocs --strict refuses a link to a file outside docs/: folders are named as code."""
    links = re.findall(r"\]\(([^)]+)\)", GALLERY.read_text())
    assert not [link for link in links if link.startswith("..")]


VOLATILE = re.compile(r"^(session|stream)=|\"(datetime|day_of_week)\"|^\s*(\.\.\.|…)$")
"""Lines of documented output that differ from run to run (ids, clocks) or stand for others."""


def check_documented(name: str, out: str) -> None:
    """Every line the example's README and its gallery section show as output, it printed."""
    printed = set(out.splitlines())
    readme = (EXAMPLES / name / "README.md").read_text()
    for where, text in (("README.md", readme), ("gallery section", gallery_sections()[name])):
        shown = [
            line
            for block in re.findall(r"```text\n(.*?)```", text, flags=re.DOTALL)
            for line in block.splitlines()
            if line.strip() and not VOLATILE.search(line)
        ]
        missing = [line for line in shown if line not in printed]
        assert not missing, f"examples/{name}: its {where} shows what it does not print: {missing}"


def gallery_sections() -> dict[str, str]:
    """The gallery page's ``## name`` sections, by name."""
    parts = re.split(r"^## (\S+)$", GALLERY.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_gallery_excerpts_are_the_examples_code() -> None:
    """Each line of a gallery excerpt is in the example's files, so the page cannot drift."""
    sections = gallery_sections()
    assert sorted(sections) == FOLDERS
    for name, section in sections.items():
        source = {
            line.strip()
            for path in (EXAMPLES / name).glob("*.py")
            for line in path.read_text().splitlines()
        }
        for excerpt in re.findall(r"```py\n(.*?)```", section, flags=re.DOTALL):
            for line in excerpt.splitlines():
                kept = line.split("  # ")[0].strip()  # a gallery comment may differ
                if kept and kept not in ("...", "# ...") and not line.strip().startswith("# "):
                    assert any(kept in s for s in source), f"{name}: {line!r} is not in its code"
