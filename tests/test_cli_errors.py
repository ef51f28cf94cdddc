"""Every user mistake at the command line: one line on stderr, the documented exit code.

Each test runs the real ``mainspring`` command in a folder of its own and
checks the one line (``error: …``, no traceback), the exit code of
:class:`~mainspring.cli.exit.ExitCode`, and that nothing was created or
deleted. A missing extra is simulated by blocking its import in the child
(``sys.modules[name] = None``, what Python does for a package that is absent).
Hints the CLI prints are run as printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mainspring.cli.exit import ExitCode
from tests.stores.servers import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("mainspring")
TIMEOUT = 120

BLOCKING = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None  # as if the package were not installed\n"
    "sys.argv = ['mainspring', *sys.argv[2:]]\n"
    "from mainspring.cli.commands import main\n"
    "main()\n"
)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def line(self) -> str:
        """The one line on stderr (and there is only one, and no traceback anywhere)."""
        assert "Traceback" not in self.out + self.err, self
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self
        assert lines[0].startswith("error: "), self
        return lines[0]


def mainspring(
    *args: str,
    cwd: Path,
    block: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    stdin: str = "",
) -> Ran:
    """The real command, run in ``cwd`` (``tests.cli_agents`` importable)."""
    if block:
        command = [sys.executable, "-c", BLOCKING, ",".join(block), *args]
    elif SCRIPT.exists():
        command = [str(SCRIPT), *args]
    else:
        command = [sys.executable, "-m", "mainspring", *args]
    environment = dict(os.environ)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        environment.pop(name, None)
    environment.update(env or {})
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]
    )
    done = subprocess.run(
        command,
        cwd=cwd,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """A working folder with a broken module and a module that fails at import."""
    (tmp_path / "broken.py").write_text("def agent(:\n")
    (tmp_path / "raising.py").write_text("raise RuntimeError('import-time boom')\n")
    return tmp_path


# --------------------------------------------------------------- the demo


def test_the_finance_demo_needs_no_extra(here: Path) -> None:
    ran = mainspring("demo", "finance", "--yes", cwd=here, block=("jsonschema",))
    assert ran.code == ExitCode.OK, ran
    assert "turn complete (end_turn)" in ran.out and "Traceback" not in ran.err


def test_the_wallet_hint_works_when_pasted(here: Path) -> None:
    paused = mainspring("demo", "--store", "sqlite:///demo.db", cwd=here)
    assert paused.code == ExitCode.OK, paused
    hint = re.search(r"continue later with (mainspring demo .*? --yes)", paused.out)
    assert hint is not None, paused.out
    later = mainspring(*shlex.split(hint.group(1))[1:], cwd=here)
    assert later.code == ExitCode.OK, later
    assert "→ send_payment" in later.out and "new balance is $130.00" in later.out


def test_a_redis_store_keeps_no_demo_session_and_says_what_does(
    here: Path, redis_server: RedisServer
) -> None:
    paused = mainspring("demo", "--store", redis_server.url, cwd=here)
    assert paused.code == ExitCode.OK, paused
    assert "continue later" not in paused.out
    assert "keeps no sessions beyond this process; use --store sqlite:///demo.db" in paused.out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nope"], "unknown demo 'nope'"),
        (["--store", "mysql://x"], "unknown store URL 'mysql://x'"),
        (["--session", "abc"], "--session needs --store"),
        (["finance", "--tiers", "wild", "--yes"], "unknown USD tier preset 'wild'"),
        (["finance", "--ledger", "/proc/nowhere/l.db", "--yes"], "cannot open the ledger"),
        (["--model", "anthropic:claude-x"], "needs ANTHROPIC_API_KEY"),
        (["--model", "nope:x"], "unknown model provider 'nope'"),
        (["coding", "--store", "sqlite:///x.db"], "keep the wallet demo, not coding"),
        (["--ledger", "l.db"], "--ledger is the finance demo's"),
    ],
)
def test_demo_mistakes(here: Path, args: list[str], fragment: str) -> None:
    before = files(here)
    ran = mainspring("demo", *args, cwd=here)
    assert ran.code == ExitCode.USAGE and fragment in ran.line
    assert files(here) == before


def test_a_session_in_a_database_that_is_not_there_creates_nothing(here: Path) -> None:
    for command in (["demo"], ["chat"], ["run", "tests.cli_agents:paying", "--yes"]):
        ran = mainspring(*command, "--store", "sqlite:///typo.db", "--session", "abc", cwd=here)
        assert ran.code == ExitCode.USAGE, (command, ran)
        assert "no database at typo.db" in ran.line
        assert not (here / "typo.db").exists()


def test_a_model_without_its_extra_names_the_install(here: Path) -> None:
    ran = mainspring(
        "demo", "--model", "anthropic:claude-x", cwd=here, block=("anthropic",),
        env={"ANTHROPIC_API_KEY": "k"},
    )  # fmt: skip
    assert ran.code == ExitCode.USAGE
    assert 'pip install "mainspring[anthropic]"' in ran.line


# ------------------------------------------------------------------ run


def test_an_internal_error_in_a_run_is_one_line_without_debug(here: Path) -> None:
    ran = mainspring("run", "tests.cli_agents:crashing", "hi", cwd=here)
    assert ran.code == ExitCode.FAILURE
    assert "Traceback" not in ran.out + ran.err and ran.err == ""
    assert ran.out.strip() == (
        "error (internal_error): ZeroDivisionError: a bug inside the model "
        "(--debug shows the traceback)"
    )


def test_an_internal_error_in_a_json_run_is_a_json_error_object(here: Path) -> None:
    ran = mainspring("run", "tests.cli_agents:crashing", "hi", "--json", cwd=here)
    assert ran.code == ExitCode.FAILURE
    assert "Traceback" not in ran.out + ran.err and ran.err == ""
    last = json.loads(ran.out.splitlines()[-1])
    assert last["type"] == "error" and last["code"] == "internal_error"
    assert "ZeroDivisionError" in last["message"]


def test_a_json_run_that_cannot_start_says_so_in_json_too(here: Path) -> None:
    ran = mainspring("run", "nowhere_module:agent", "hi", "--json", cwd=here)
    assert ran.code == ExitCode.USAGE and "cannot import" in ran.line
    failure = json.loads(ran.out)
    assert failure == {
        "type": "error",
        "code": "usage_error",
        "message": ran.line.removeprefix("error: "),
        "exit_code": 2,
    }


def test_debug_shows_the_traceback_of_an_internal_error(here: Path) -> None:
    ran = mainspring("run", "tests.cli_agents:crashing", "hi", "--debug", cwd=here)
    assert ran.code == ExitCode.FAILURE
    assert "Traceback" in ran.err and "ZeroDivisionError: a bug inside the model" in ran.err


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("./support.py:agent", "names a file; name its module instead: support:agent"),
        ("support.py:agent", "names a file; name its module instead: support:agent"),
        ("no_such_module_xyz:agent", "no module 'no_such_module_xyz' here"),
        ("broken:agent", "broken.py:1: syntax error in 'broken'"),
        ("raising:agent", "importing 'raising' failed: RuntimeError: import-time boom"),
        ("tests.cli_agents:missing", "has no attribute 'missing'"),
        ("tests.cli_agents:not_an_agent", "is of type int, not an Agent"),
        ("tests.cli_agents:make_crashing", "RuntimeError: the factory fails"),
        ("no_colon", "package.module:attribute"),
    ],
)
def test_a_bad_agent_is_a_usage_error(here: Path, spec: str, fragment: str) -> None:
    ran = mainspring("run", spec, "hi", cwd=here)
    assert ran.code == ExitCode.USAGE, ran
    assert fragment in ran.line, ran


@pytest.mark.parametrize("command", [["chat"], ["serve"], ["mcp", "serve"]])
def test_every_command_that_takes_an_agent_says_the_same(here: Path, command: list[str]) -> None:
    for spec, fragment in [
        ("./support.py:agent", "name its module instead: support:agent"),
        ("broken:agent", "broken.py:1: syntax error in 'broken'"),
    ]:
        ran = mainspring(*command, spec, cwd=here)
        assert ran.code == ExitCode.USAGE, (command, ran)
        assert fragment in ran.line, (command, ran)
    assert not (here / "mainspring.db").exists()


def test_the_run_hint_works_when_pasted(here: Path) -> None:
    paused = mainspring(
        "run", "tests.cli_agents:paying", "pay", "--store", "sqlite:///a.db", cwd=here
    )
    assert paused.code == ExitCode.WAITING, paused
    hint = re.search(r"approve it with: (mainspring run .*--yes)", paused.out)
    assert hint is not None, paused.out
    done = mainspring(*shlex.split(hint.group(1))[1:], cwd=here)
    assert done.code == ExitCode.OK, done
    assert "paid $5" in done.out and "Done: the payment went through." in done.out


def test_the_chat_hint_works_when_pasted(here: Path) -> None:
    from mainspring.demo import DEMO_MESSAGE

    left = mainspring(
        "chat", "--store", "sqlite:///c.db", cwd=here, stdin=f"{DEMO_MESSAGE}\n/exit\n"
    )
    assert left.code == ExitCode.OK, left
    hint = re.search(r"waits for a decision\): (mainspring chat .*)$", left.out, re.MULTILINE)
    assert hint is not None, left.out
    back = mainspring(*shlex.split(hint.group(1))[1:], cwd=here, stdin="y\n/exit\n")
    assert back.code == ExitCode.OK, back
    assert "← send_payment" in back.out and "new balance is $130.00" in back.out


def test_a_pause_without_a_store_says_how_to_keep_it(here: Path) -> None:
    paused = mainspring("run", "tests.cli_agents:paying", "pay", cwd=here)
    assert paused.code == ExitCode.WAITING
    assert "use --store sqlite:///agent.db to continue later" in paused.out
    assert "--session" not in paused.out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["hi", "--session", "abc"], "--session needs --store"),
        ([], "say something: mainspring run AGENT MESSAGE"),
        (["hi", "--store", "mysql://x"], "unknown store URL 'mysql://x'"),
    ],
)
def test_run_mistakes(here: Path, args: list[str], fragment: str) -> None:
    ran = mainspring("run", "tests.cli_agents:paying", *args, cwd=here)
    assert ran.code == ExitCode.USAGE and fragment in ran.line


def test_a_stored_session_that_is_not_there(here: Path) -> None:
    mainspring("run", "tests.cli_agents:paying", "pay", "--store", "sqlite:///a.db", cwd=here)
    ran = mainspring(
        "run", "tests.cli_agents:paying", "--store", "sqlite:///a.db", "--session", "nope", "--yes",
        cwd=here,
    )  # fmt: skip
    assert ran.code == ExitCode.USAGE and "no stored session 'nope'" in ran.line


def test_an_unreachable_store_is_exit_4(here: Path) -> None:
    closed = free_port()
    for url in (f"redis://127.0.0.1:{closed}", f"postgresql://u@127.0.0.1:{closed}/db"):
        ran = mainspring("run", "tests.cli_agents:paying", "hi", "--store", url, cwd=here)
        assert ran.code == ExitCode.UNAVAILABLE, ran
        assert ran.line.startswith("error: store unavailable: cannot reach")
    as_json = mainspring(
        "run", "tests.cli_agents:paying", "hi", "--json", "--store", f"redis://127.0.0.1:{closed}",
        cwd=here,
    )  # fmt: skip
    assert as_json.code == ExitCode.UNAVAILABLE
    assert json.loads(as_json.out)["code"] == "store_unavailable"


@pytest.mark.parametrize(
    ("url", "blocked", "extra"),
    [("redis://127.0.0.1:1", "redis", "redis"), ("postgresql://u@h/db", "psycopg", "postgres")],
)
def test_a_store_without_its_extra_names_the_install(
    here: Path, url: str, blocked: str, extra: str
) -> None:
    ran = mainspring(
        "run", "tests.cli_agents:paying", "hi", "--store", url, cwd=here, block=(blocked,)
    )
    assert ran.code == ExitCode.USAGE
    assert f'pip install "mainspring[{extra}]"' in ran.line


# ---------------------------------------------------------------- serve


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--store", "mysql://x"], "unknown store URL 'mysql://x'"),
        (["--store", "redis://127.0.0.1:1"], "no store holds sessions"),
        (["--port", "80000"], "Invalid value for '--port'"),
        (["--keys-file", "nowhere.txt"], "cannot read --keys-file nowhere.txt"),
        (["--engine", "nowhere_module:engine"], "cannot import"),
        (["--host", "999.1.1.1"], "unknown --host '999.1.1.1'"),
        (["--store", "memory://", "--workers", "2"], "several workers need shared stores"),
        (["--checkpoints", "postgresql://x"], "postgresql:// cannot hold checkpoints"),
        (["--sessions", "redis://127.0.0.1:1"], "redis:// cannot hold sessions"),
        (["--lock-ttl", "0"], "Invalid value for '--lock-ttl'"),
    ],
)
def test_serve_mistakes_fail_before_serving(here: Path, args: list[str], fragment: str) -> None:
    ran = mainspring("serve", *args, cwd=here)
    assert ran.code == ExitCode.USAGE, ran
    assert fragment in ran.line and "serving" not in ran.out + ran.err
    assert not (here / "mainspring.db").exists()


def test_serve_with_a_store_that_is_down_is_exit_4(here: Path) -> None:
    closed = free_port()
    ran = mainspring(
        "serve", "--sessions", f"postgresql://u@127.0.0.1:{closed}/db",
        "--checkpoints", f"redis://127.0.0.1:{closed}", "--locks", f"redis://127.0.0.1:{closed}",
        "--port", str(free_port()), cwd=here,
    )  # fmt: skip
    assert ran.code == ExitCode.UNAVAILABLE and "cannot reach" in ran.line
    assert "serving" not in ran.err


@pytest.mark.parametrize("blocked", ["uvicorn", "fastapi"])
def test_serve_without_its_extra_names_the_install(here: Path, blocked: str) -> None:
    ran = mainspring("serve", cwd=here, block=(blocked,))
    assert ran.code == ExitCode.USAGE
    assert 'pip install "mainspring[server]"' in ran.line
    assert not (here / "mainspring.db").exists()


def test_mcp_serve_without_its_extra_names_the_install(here: Path) -> None:
    ran = mainspring("mcp", "serve", cwd=here, block=("mcp",))
    assert ran.code == ExitCode.USAGE
    assert 'pip install "mainspring[mcp]"' in ran.line


def test_a_signing_key_others_may_read_is_refused(here: Path) -> None:
    key = here / "mainspring.db.signing-key"
    key.write_text("ab" * 32)
    key.chmod(0o644)
    ran = mainspring("serve", "--port", str(free_port()), cwd=here)
    assert ran.code == ExitCode.USAGE
    assert "may be read by others (mode 644): chmod 600" in ran.line


# ------------------------------------------------------------- sessions


def test_sessions_on_a_missing_database_creates_nothing(here: Path) -> None:
    for command in (["list"], ["show", "x"], ["delete", "x"]):
        ran = mainspring("sessions", *command, "--store", "sqlite:///missing.db", cwd=here)
        assert ran.code == ExitCode.USAGE, ran
        assert "no database at missing.db" in ran.line
    assert files(here) == {"broken.py", "raising.py"}


def test_deleting_a_session_that_is_not_there_fails_and_keeps_the_rest(here: Path) -> None:
    mainspring("run", "tests.cli_agents:paying", "pay", "--store", "sqlite:///a.db", cwd=here)
    kept = mainspring("sessions", "list", "--store", "sqlite:///a.db", cwd=here).out.split()
    assert len(kept) == 1
    ran = mainspring("sessions", "delete", "nope", "--store", "sqlite:///a.db", cwd=here)
    assert ran.code == ExitCode.USAGE
    assert "no stored session 'nope'" in ran.line and "sessions list --store" in ran.line
    shown = mainspring("sessions", "show", "nope", "--store", "sqlite:///a.db", cwd=here)
    assert shown.code == ExitCode.USAGE and "no stored session 'nope'" in shown.line
    after = mainspring("sessions", "list", "--store", "sqlite:///a.db", cwd=here).out.split()
    assert after == kept


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mysql://x", "unknown store URL"),
        ("redis://127.0.0.1:1", "holds checkpoints and locks, not sessions"),
        ("memory://", "lives inside one process"),
    ],
)
def test_sessions_on_a_store_without_sessions(here: Path, url: str, fragment: str) -> None:
    ran = mainspring("sessions", "list", "--store", url, cwd=here)
    assert ran.code == ExitCode.USAGE and fragment in ran.line


# ------------------------------------------------- pipeline, report, mcp, usage


def test_a_pipeline_folder_that_is_not_one(here: Path) -> None:
    (here / "file.txt").write_text("not a folder")
    (here / "empty").mkdir()
    for folder, fragment in [
        ("nowhere", "workspace folder does not exist"),
        ("file.txt", "not a folder"),
        ("empty", "workspace has no AGENT.md"),
    ]:
        ran = mainspring("pipeline", "run", folder, cwd=here)
        assert ran.code == ExitCode.USAGE and fragment in ran.line, ran
    both = mainspring("pipeline", "run", "empty", "--stage", "1", "--resume", cwd=here)
    assert both.code == ExitCode.USAGE and "choose one" in both.line


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "no such file: log.jsonl"), (b"{bad\n", "log.jsonl, line 1: not a JSON line")],
)
def test_report_mistakes(here: Path, content: bytes | None, fragment: str) -> None:
    if content is not None:
        (here / "log.jsonl").write_bytes(content)
    ran = mainspring("report", "log.jsonl", cwd=here)
    assert ran.code == ExitCode.USAGE and fragment in ran.line
    assert not (here / "report.html").exists()


def test_mcp_serve_mistakes(here: Path) -> None:
    for args, fragment in [
        (["--skills", "nowhere"], "--skills nowhere: no such folder"),
        (["--http", "--token-file", "nowhere.txt"], "cannot read --token-file nowhere.txt"),
        (["--http", "--host", "10.0.0.1"], "without a bearer token"),
        (["--http", "--port", "80000"], "Invalid value for '--port'"),
    ]:
        ran = mainspring("mcp", "serve", *args, cwd=here)
        assert ran.code == ExitCode.USAGE and fragment in ran.line, ran


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bogus"], "No such command 'bogus'. (see: mainspring --help)"),
        (["demo", "--nope"], "No such option: --nope"),
        (["run"], "Missing argument 'agent'. (see: mainspring run --help)"),
        (["sessions", "list"], "Missing option '--store'"),
    ],
)
def test_a_usage_mistake_click_catches_is_one_line_too(
    here: Path, args: list[str], fragment: str
) -> None:
    ran = mainspring(*args, cwd=here)
    assert ran.code == ExitCode.USAGE and fragment in ran.line


def test_the_documented_exit_codes_are_the_ones_in_the_code() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    table = page.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}
