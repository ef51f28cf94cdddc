"""The signed engine route on two worker processes sharing one store.

Two ``mainspring serve --engine`` processes (two workers, each on its own
port so the test picks which one a request reaches) share SQLite on one
machine, or PostgreSQL sessions with Redis checkpoints and locks. The tools
log their own effects; the log, not mainspring, says what ran.

- A signed request captured once and sent to both workers runs once.
- A call paused on one worker is decided on the other (not 404), once.
- An agent run whose subagent paused on a worker killed since is decided on
  the other, which goes on with the subagent's session (its history), once;
  another engine can neither decide it nor replay the decision.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mainspring.engine.signing import SigningKey, public_key_text
from tests.server.test_workers import _as_url, start_serve_worker

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KEY = SigningKey.generate("engine-a")
OTHER = SigningKey.generate("engine-b")


def _stores(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if backend == "sqlite":
        return ["--store", f"sqlite:///{tmp_path / 'shared.db'}"]
    redis = request.getfixturevalue("redis_server").url
    postgres = _as_url(request.getfixturevalue("postgres_url"))
    return ["--sessions", postgres, "--checkpoints", redis, "--locks", redis]


Workers = tuple[list[str], Path, list[subprocess.Popen[bytes]]]


@pytest.fixture(params=["sqlite", "redis+postgres"])
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workers]:
    effects = tmp_path / "effects.txt"
    effects.touch()
    trusted = tmp_path / "trusted.txt"
    trusted.write_text(
        "".join(f"{k.key_id} {public_key_text(k.public_key)}\n" for k in (KEY, OTHER))
    )
    env = {
        **os.environ,
        "MAINSPRING_API_KEYS": "alice=" + "k" * 32,
        "MAINSPRING_SIGNING_KEY": "ab" * 32,
        "MAINSPRING_TEST_EFFECTS": str(effects),
    }
    stores = _stores(request.param, request, tmp_path)
    processes: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    logs: list[Any] = []

    def start() -> None:
        args = [
            "--engine", "tests.server.worker_engine:engine", "--trusted-keys", str(trusted),
            *stores,
        ]  # fmt: skip
        urls.append(
            start_serve_worker(args, folder=tmp_path, env=env, processes=processes, logs=logs)
        )

    try:
        for _ in range(2):
            start()
        yield urls, effects, processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for log in logs:
            log.close()


def signed(path: str, body: dict[str, Any], key: SigningKey = KEY) -> tuple[bytes, dict[str, str]]:
    """A request to ``path`` as ``key``'s engine sends it: the body and its signed headers."""
    content = json.dumps(body, separators=(",", ":")).encode()
    headers = key.sign("POST", path, content)
    headers["content-type"] = "application/json"
    return content, headers


def test_a_captured_signed_request_runs_once_across_workers(
    workers: Workers,
) -> None:
    (a, b), effects, _ = workers
    path = "/v1/engine/tools/transfer/call"
    content, headers = signed(path, {"arguments": {"to": "mallory", "cents": 9900}})
    first = httpx.post(a + path, content=content, headers=headers, timeout=30)
    assert first.status_code == 200 and first.json()["ran"], first.text
    replays = [
        httpx.post(url + path, content=content, headers=headers, timeout=30) for url in (b, a)
    ]
    for replay in replays:
        assert replay.status_code == 401, replay.text
        assert replay.json()["reason"] == "replayed"
    assert effects.read_text().splitlines() == ["transfer mallory 9900"]


def test_a_call_paused_on_one_worker_is_decided_on_the_other_once(
    workers: Workers,
) -> None:
    (a, b), effects, _ = workers
    path = "/v1/engine/tools/close_account/call"
    content, headers = signed(path, {"arguments": {"account": "acme"}})
    paused = httpx.post(a + path, content=content, headers=headers, timeout=30)
    assert paused.status_code == 200 and paused.json()["status"] == "pending", paused.text
    attempt = paused.json()["pending"]["attempt_id"]
    assert effects.read_text() == "", "nothing runs before the decision"
    decide = f"/v1/engine/decisions/{attempt}"
    content, headers = signed(decide, {"decision": {"kind": "approved"}})
    done = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert done.status_code == 200, done.text
    assert done.json()["ran"] and done.json()["content"] == "closed acme"
    content, headers = signed(decide, {"decision": {"kind": "approved"}})  # a fresh request
    again = httpx.post(a + decide, content=content, headers=headers, timeout=30)
    assert again.status_code == 404 and again.json()["error"] == "unknown_attempt", again.text
    assert effects.read_text().splitlines() == ["close acme"]


def test_a_subagent_paused_on_a_killed_worker_goes_on_on_the_other_once(
    workers: Workers,
) -> None:
    (a, b), effects, processes = workers
    content, headers = signed("/v1/engine/scopes", {})
    opened = httpx.post(a + "/v1/engine/scopes", content=content, headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    scope = opened.json()["scope"]
    path = "/v1/engine/agents/desk/run"
    content, headers = signed(path, {"input": "mallory 4200", "scope": scope})
    paused = httpx.post(a + path, content=content, headers=headers, timeout=30)
    assert paused.status_code == 200 and paused.json()["status"] == "pending", paused.text
    pending = paused.json()["pending"]
    assert pending["name"] == "clerk" and pending["nested"]["name"] == "wire"
    assert effects.read_text() == "", "nothing runs before the decision"
    processes[0].kill()  # worker a dies with the paused run and its subagent's session
    processes[0].wait(timeout=20)
    decide = f"/v1/engine/decisions/{pending['attempt_id']}"
    content, headers = signed(decide, {"decision": {"kind": "approved"}}, OTHER)
    theirs = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert theirs.status_code == 404 and theirs.json()["error"] == "unknown_attempt"
    content, headers = signed(decide, {"decision": {"kind": "approved"}})
    done = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert done.status_code == 200, done.text
    # the clerk went on in its own session: the task it was given before the pause is there
    assert done.json()["text"] == "desk: wired 4200 to mallory; tasks ['mallory 4200']"
    replay = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert replay.status_code == 401 and replay.json()["reason"] == "replayed"
    content, headers = signed(decide, {"decision": {"kind": "approved"}})  # a fresh request
    again = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert again.status_code == 404 and again.json()["error"] == "unknown_attempt", again.text
    assert effects.read_text().splitlines() == ["wire mallory 4200"]
    # The scope opened on the dead worker goes on on this one, with the clerk's history.
    content, headers = signed(path, {"input": "bob 100", "scope": scope})
    again = httpx.post(b + path, content=content, headers=headers, timeout=30)
    assert again.status_code == 200 and again.json()["status"] == "pending", again.text
    decide = f"/v1/engine/decisions/{again.json()['pending']['attempt_id']}"
    content, headers = signed(decide, {"decision": {"kind": "approved"}})
    done = httpx.post(b + decide, content=content, headers=headers, timeout=30)
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "desk: wired 100 to bob; tasks ['mallory 4200', 'bob 100']"
    assert effects.read_text().splitlines() == ["wire mallory 4200", "wire bob 100"]
