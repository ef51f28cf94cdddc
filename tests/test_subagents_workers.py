"""Paused subagent runs across worker processes sharing one store.

Each step is a real process of its own (``tests/subagent_worker.py``) on
SQLite, or on PostgreSQL sessions and Redis records: the worker that paused a
subagent's write is killed, and others decide it. The tool logs its own
effects; the log, not mainspring, says what ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_workers import _as_url

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "redis+postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
        return ["--sessions", url, "--locks", url]
    redis = request.getfixturevalue("redis_server").url
    postgres = _as_url(request.getfixturevalue("postgres_url"))
    return ["--sessions", postgres, "--locks", redis]


class Workers:
    """Starts worker processes on one store, with one effect log."""

    def __init__(self, stores: list[str], tmp_path: Path) -> None:
        self.stores = stores
        self.effects = tmp_path / "effects.txt"
        self.effects.touch()
        self.env = {**os.environ, "MAINSPRING_TEST_EFFECTS": str(self.effects)}

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "tests.subagent_worker", *args, *self.stores]
        return subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def answer(self, process: subprocess.Popen[bytes]) -> Any:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
        return json.loads(out)

    def run(self, *args: str) -> Any:
        return self.answer(self.start(*args))

    def effects_seen(self) -> list[str]:
        return self.effects.read_text().splitlines()


def test_a_subagent_paused_on_a_killed_worker_is_decided_on_another_once(
    stores: list[str], tmp_path: Path
) -> None:
    workers = Workers(stores, tmp_path)
    first = workers.start("pause", "alice", "mallory 9900")
    try:
        assert first.stdout is not None
        line = first.stdout.readline()
        assert line, first.communicate(timeout=60)[1].decode()
        attempt = json.loads(line)["attempt_id"]
    finally:
        first.kill()  # the worker that paused it dies
        first.communicate(timeout=60)
    assert workers.effects_seen() == [], "nothing runs before the decision"

    # Another principal neither sees nor decides it.
    assert workers.run("pending", "bob") == []
    assert workers.run("decide", "bob", attempt, "approve") == {"outcome": "unknown"}
    assert workers.run("pending", "alice") == [attempt]
    # A refused decision leaves it waiting, on every worker.
    refused = workers.run("decide", "alice", attempt, "edit-to")
    assert refused["outcome"] == "refused" and "not modifiable" in refused["error"]
    assert workers.run("pending", "alice") == [attempt]

    # Two workers decide it at once: one goes on, from the subagent's own history.
    racing = [workers.start("decide", "alice", attempt, "approve") for _ in range(2)]
    outcomes = sorted((workers.answer(p) for p in racing), key=lambda o: o["outcome"])
    assert outcomes == [
        {"outcome": "ran", "text": "paid 9900 to mallory; tasks ['mallory 9900']"},
        {"outcome": "unknown"},
    ]
    # Replayed later: refused, and the write ran once.
    assert workers.run("decide", "alice", attempt, "approve") == {"outcome": "unknown"}
    assert workers.run("pending", "alice") == []
    assert workers.effects_seen() == ["pay mallory 9900"]
