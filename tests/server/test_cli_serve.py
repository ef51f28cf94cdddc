"""``mainspring serve`` through its real entry point."""

from __future__ import annotations

import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from mainspring.cli import serve_keys as keys_module
from mainspring.cli.serve_keys import SIGNING_KEY_ENV, signing_key
from mainspring.demo import DEMO_MESSAGE
from mainspring.errors import ConfigError
from tests.server.conftest import ALICE
from tests.stores.servers import free_port

pytestmark = pytest.mark.slow

START_TIMEOUT = 60.0


def _serve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``mainspring serve`` in ``cwd`` (where its default ./mainspring.db goes)."""
    environment = {k: v for k, v in os.environ.items() if k != SIGNING_KEY_ENV}
    return subprocess.Popen(
        [sys.executable, "-m", "mainspring", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**environment, **(env or {})},
    )


def _start_lines(process: subprocess.Popen[str], last: str) -> str:
    """What the server says at start-up, up to the line holding ``last``."""
    assert process.stdout is not None
    lines: list[str] = []
    while not any(last in line for line in lines):
        line = process.stdout.readline()
        assert line, "".join(lines)  # it exited before saying it
        lines.append(line)
    return "".join(lines)


def _ready(base: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the server did not answer /healthz")


def test_with_no_key_configured_it_generates_one_and_stays_private(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MAINSPRING_API_KEYS"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mainspring", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and not any("API key" in line for line in lines):
            lines.append(process.stdout.readline())
        assert f"at http://127.0.0.1:{port}" in "".join(lines)
        key = re.search(r"API key .*: (\S+)", "".join(lines))
        assert key is not None
        base = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert httpx.get(f"{base}/v1/sessions", timeout=5).status_code == 401
        auth = {"Authorization": f"Bearer {key.group(1)}"}
        assert httpx.get(f"{base}/v1/sessions", headers=auth, timeout=5).status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _serve(
            "--port", str(port), cwd=tmp_path, env={"MAINSPRING_API_KEYS": "a=" + "k" * 20}
        )
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out.strip().splitlines()[-1] == f"error: 127.0.0.1:{port} is in use; pick another --port"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--workers", "2", "--store", "memory://"], {}, "several workers need shared stores"),
        ([], {"MAINSPRING_API_KEYS": "alice=short"}, "at least 16 characters"),
        ([], {"MAINSPRING_API_KEYS": "no-equals-sign-here"}, "principal=key"),
        ([], {"MAINSPRING_SIGNING_KEY": "zz"}, "must be hex"),
        (["nowhere.module:agent"], {}, "cannot import"),
        (["--allowed-host", "https://a.example"], {}, "bare host name"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str, tmp_path: Path
) -> None:
    process = _serve(*args, "--port", str(free_port()), cwd=tmp_path, env=env)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    assert out.strip().startswith("error:") and message in out, out
    assert len(out.strip().splitlines()) == 1 and "serving" not in out


def test_a_public_server_answers_only_its_hosts_and_json(tmp_path: Path) -> None:
    port = free_port()
    process = _serve(
        "--public", "--store", "memory://", "--port", str(port),
        "--allowed-host", "agents.example.test", cwd=tmp_path,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        _ready(base, process)
        named = {"Host": f"agents.example.test:{port}"}
        made = httpx.post(f"{base}/v1/sessions", json={}, headers=named, timeout=30)
        assert made.status_code == 201, made.text
        rebound = {"Host": f"evil.example:{port}"}
        assert httpx.post(f"{base}/v1/sessions", json={}, headers=rebound).status_code == 421
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        refused = httpx.post(f"{base}/v1/sessions", content=b"a=1", headers=form, timeout=30)
        assert refused.status_code == 415
        assert len(httpx.get(f"{base}/v1/sessions", timeout=30).json()["sessions"]) == 1
    finally:
        process.terminate()
        process.communicate(timeout=30)


KEYS_ENV = {"MAINSPRING_API_KEYS": f"alice={ALICE}"}
AUTH = {"Authorization": f"Bearer {ALICE}"}


def _pause_on_a_payment(base: str) -> tuple[str, str]:
    """A new session, its turn paused on the demo's payment: (session id, approval id)."""
    session_id = httpx.post(f"{base}/v1/sessions", headers=AUTH, timeout=30).json()["session_id"]
    with httpx.stream(
        "POST",
        f"{base}/v1/sessions/{session_id}/messages",
        json={"message": DEMO_MESSAGE},
        headers=AUTH,
        timeout=60,
    ) as response:
        assert response.status_code == 200
        response.read()  # to the end of the turn
    pending = httpx.get(f"{base}/v1/sessions/{session_id}/pending", headers=AUTH, timeout=30)
    body = pending.json()["pending"]
    assert body is not None and body["name"] == "send_payment", pending.text
    return session_id, str(body["approval_id"])


def test_by_default_sessions_and_approvals_survive_a_restart(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = _serve("--port", str(port), cwd=tmp_path, env=KEYS_ENV)
    try:
        said = _start_lines(first, "chat page")
        assert f"store: sqlite:///mainspring.db (the file {tmp_path / 'mainspring.db'})" in said
        key_file = tmp_path / "mainspring.db.signing-key"
        assert f"approval signing key: made and kept in {key_file} (mode 600)" in said
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert "warning" not in said
        _ready(base, first)
        session_id, approval_id = _pause_on_a_payment(base)
    finally:
        first.terminate()
        first.communicate(timeout=30)
    second = _serve("--port", str(port), cwd=tmp_path, env=KEYS_ENV)
    try:
        said = _start_lines(second, "chat page")
        assert f"approval signing key: kept in {key_file} (mode 600)" in said
        _ready(base, second)
        decided = httpx.post(
            f"{base}/v1/sessions/{session_id}/decisions/{approval_id}",
            json={"decision": "approve"},
            headers=AUTH,
            timeout=60,
        )
        assert decided.status_code == 200, decided.text  # not 403: the same key signs
        assert "new_balance_usd" in decided.text
    finally:
        second.terminate()
        second.communicate(timeout=30)


def test_an_in_memory_store_warns_that_a_restart_forgets(tmp_path: Path) -> None:
    port = free_port()
    process = _serve("--port", str(port), "--store", "memory://", cwd=tmp_path, env=KEYS_ENV)
    try:
        said = _start_lines(process, "chat page")
        assert "store: memory://" in said
        assert (
            "warning: sessions and approvals live in memory: a restart forgets them; "
            "use --store sqlite:///mainspring.db to keep them" in said
        )
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert list(tmp_path.iterdir()) == []  # nothing written


# --------------------------------------------------------- the signing key's source


def test_the_environment_key_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIGNING_KEY_ENV, "cd" * 32)
    key = signing_key(str(tmp_path / "a.db"), in_memory=False, workers=1)
    assert key.hex == "cd" * 32 and key.lasting
    assert not (tmp_path / "a.db.signing-key").exists()  # nothing kept beside the file


def test_sessions_in_postgresql_without_a_key_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SIGNING_KEY_ENV, raising=False)
    one = signing_key(None, in_memory=False, workers=1)
    assert one.hex is None and not one.lasting
    assert one.note.startswith("warning: approval ids will not survive a restart")
    assert f"set ${SIGNING_KEY_ENV}" in one.note
    shared = signing_key(None, in_memory=False, workers=3)
    assert shared.hex is not None and len(bytes.fromhex(shared.hex)) == 32  # one for all


def test_a_server_starting_while_another_makes_the_key_reads_the_whole_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start draws its key slowly; the second, meanwhile, finds the file."""
    monkeypatch.delenv(SIGNING_KEY_ENV, raising=False)
    database = str(tmp_path / "a.db")
    second_done, drawing = threading.Event(), threading.Event()
    drawn: list[int] = []

    class SlowFirstDraw:
        def token_hex(self, n: int) -> str:
            drawn.append(n)
            if len(drawn) == 1:  # the first start waits until the second one has its key
                drawing.set()
                second_done.wait(timeout=30)
            return secrets.token_hex(n)

    monkeypatch.setattr(keys_module, "secrets", SlowFirstDraw())
    found: dict[str, str | None] = {}

    def start(name: str) -> None:
        try:
            found[name] = signing_key(database, in_memory=False, workers=1).hex
        except ConfigError as exc:
            found[name] = f"error: {exc}"
        finally:
            if name == "second":
                second_done.set()

    first = threading.Thread(target=start, args=("first",))
    first.start()
    assert drawing.wait(timeout=30)  # the first start is drawing its key now
    start("second")
    first.join(timeout=30)
    assert found["first"] == found["second"] and found["first"] is not None, found
    assert len(bytes.fromhex(found["first"])) == 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db.signing-key"]  # no drafts left
    assert (tmp_path / "a.db.signing-key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("text", "problem"), [("zz", "must be hex"), ("ab" * 8, "32 bytes")])
def test_a_malformed_kept_key_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    kept = tmp_path / "a.db.signing-key"
    kept.write_text(text)
    kept.chmod(0o600)
    with pytest.raises(ConfigError, match=problem):
        signing_key(str(tmp_path / "a.db"), in_memory=False, workers=1)
    assert kept.read_text() == text  # left as it was
