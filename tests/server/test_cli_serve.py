"""``mainspring serve`` through its real entry point."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.stores.servers import free_port

pytestmark = pytest.mark.slow

START_TIMEOUT = 60.0


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mainspring", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_with_no_key_configured_it_generates_one_and_stays_private() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MAINSPRING_API_KEYS"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mainspring", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
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


def test_a_busy_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _serve("--port", str(port), env={"MAINSPRING_API_KEYS": "a=" + "k" * 20})
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out.strip().splitlines()[-1] == f"error: 127.0.0.1:{port} is in use; pick another --port"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--workers", "2"], {}, "several workers need shared stores"),
        ([], {"MAINSPRING_API_KEYS": "alice=short"}, "at least 16 characters"),
        ([], {"MAINSPRING_API_KEYS": "no-equals-sign-here"}, "principal=key"),
        ([], {"MAINSPRING_SIGNING_KEY": "zz"}, "must be hex"),
        (["nowhere.module:agent"], {}, "cannot import"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str
) -> None:
    process = _serve(*args, "--port", str(free_port()), env=env)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    assert out.strip().startswith("error:") and message in out, out
