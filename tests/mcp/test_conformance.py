"""The official MCP conformance suite against mainspring's client and server.

``@modelcontextprotocol/conformance`` (npm) plays each scenario's server for
the client scenarios (our client is ``_conformance_client.py``, through the
public :class:`McpClientManager`), and each scenario's client against a real
``mainspring mcp serve --http`` of ``_conformance_agent.py`` for the server
scenarios. The exact set of scenarios that pass is asserted, so a regression
fails and progress must be recorded here; the scenarios still failing are
listed with what they need.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp import _conformance as suite

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).with_name("_conformance_client.py")

CLIENT_SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
"""The suite's core client scenarios (its ``auth/*`` ones need an OAuth client: not yet)."""

SERVER_PASSES = {
    "completion-complete",
    "dns-rebinding-protection",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "logging-set-level",
    "ping",
    "prompts-get-embedded-resource",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-with-image",
    "prompts-list",
    "resources-list",
    "resources-read-binary",
    "resources-read-text",
    "resources-subscribe",
    "resources-templates-read",
    "resources-unsubscribe",
    "server-initialize",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "tools-call-elicitation",
    "tools-call-error",
    "tools-call-image",
    "tools-call-sampling",
    "tools-call-simple-text",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-list",
}
"""The server scenarios that pass today (of the suite's 32)."""

SERVER_MISSING = {
    "tools-call-audio": "audio in tool results",
    "tools-call-embedded-resource": "embedded resources in tool results",
    "tools-call-mixed-content": "embedded resources in tool results",
}
"""The server scenarios that fail today, with the capability each needs."""


@pytest.fixture(scope="module")
def installed() -> None:
    why_not = suite.install()
    if why_not is not None:
        pytest.skip(f"{suite.NEEDS} ({why_not})")


@pytest.mark.parametrize("scenario", CLIENT_SCENARIOS)
def test_the_client_passes_the_core_client_scenarios(
    installed: None, scenario: str, tmp_path: Path
) -> None:
    command = f"{sys.executable} {CLIENT}"
    outcome = suite.run(["client", "--command", command, "--scenario", scenario], tmp_path)
    assert outcome.failures == {scenario: []}, outcome.output[-3000:]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A real ``mainspring mcp serve --http`` of the conformance agent; its URL."""
    command = [sys.executable, "-m", "mainspring", "mcp", "serve"]
    command += ["tests.mcp._conformance_agent:serve", "--http", "--port", "0"]
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    stderr = process.stderr
    drain = threading.Thread(target=lambda: log.writelines(stderr), daemon=True)
    try:
        for line in stderr:
            log.write(line)
            found = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                drain.start()  # the rest of its stderr, so the server never blocks on it
                yield found.group(1)
                break
        else:
            raise AssertionError(f"mcp serve exited with {process.wait(timeout=30)}")
    finally:
        process.terminate()
        process.wait(timeout=30)
        if drain.is_alive():
            drain.join(timeout=30)
        stderr.close()
        log.close()


def test_the_server_suite_passes_exactly_the_recorded_scenarios(
    installed: None, served: str, tmp_path: Path
) -> None:
    outcome = suite.run(["server", "--url", served, "--suite", "all"], tmp_path / "results")
    assert set(outcome.failures) == SERVER_PASSES | set(SERVER_MISSING), "the suite's scenarios"
    failed = {name: outcome.failures[name] for name in outcome.failed}
    assert outcome.passed == SERVER_PASSES, failed
