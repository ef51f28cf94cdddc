"""Run the tests that exercise dependencies; say per adapter or store: OK or BROKE.

``make test-min`` and ``make test-latest`` run this in their virtualenvs (the oldest
and the newest versions pyproject.toml allows). Each test's node id names its
component: its file (``tests/models/test_anthropic.py``) or, in suites that run every
adapter or store, its parameters (``test_faults.py::...[reset-anthropic]``,
``test_contract.py::...[asyncio-redis]``). A component is BROKE when any of its tests
failed or errored, and the failing node ids follow.

Usage::

    python .ci/by_component.py [extra pytest arguments]

Exits 0 when every component is OK, 1 otherwise.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import metadata

import pytest

TESTS = [
    "tests/models",
    "tests/stores",
    "tests/server",
    "tests/mcp",
    "tests/test_cli.py",
    "tests/test_cli_chat.py",
    "tests/test_cli_terminal.py",
]
"""The tests that exercise what the dependencies do (adapters, stores, servers, CLI)."""

# Files that belong to one component whatever their parameters.
FILES = {
    "tests/models/test_anthropic.py": "anthropic",
    "tests/models/test_openai_chat.py": "openai chat",
    "tests/models/test_openai_responses.py": "openai responses",
    "tests/models/test_gemini.py": "gemini",
    "tests/models/test_embeddings.py": "embeddings",
    "tests/stores/test_redis.py": "redis",
    "tests/stores/test_postgres.py": "postgres",
    "tests/stores/test_sqlite.py": "sqlite",
    "tests/stores/test_artifacts.py": "artifacts (obstore)",
}
# A parameter token that names the component, in the suites over every adapter or store
# (tests/models and tests/stores).
PARAMS = {
    "anthropic": "anthropic",
    "chat": "openai chat",
    "responses": "openai responses",
    "gemini": "gemini",
    "redis": "redis",
    "postgres": "postgres",
    "sqlite": "sqlite",
}
# Otherwise, the folder (or file prefix) says.
FOLDERS = {
    "tests/models/": "models (shared)",
    "tests/stores/": "stores (memory, shared)",
    "tests/server/": "server",
    "tests/mcp/": "mcp",
    "tests/test_cli": "cli",
}
# The distributions whose versions the report shows.
SHOWN = [
    "anthropic",
    "openai",
    "google-genai",
    "httpx2",
    "redis",
    "psycopg",
    "mcp",
    "fastapi",
    "starlette",
    "pydantic",
]


def component(nodeid: str) -> str:
    """The adapter or store a test's node id belongs to."""
    path, _, rest = nodeid.partition("::")
    if path in FILES:
        return FILES[path]
    found = re.search(r"\[(.*)\]$", rest)
    over_all = path.startswith(("tests/models/", "tests/stores/"))
    for token in re.split(r"[-_]", found.group(1)) if found and over_all else ():
        if token in PARAMS:
            return PARAMS[token]
    for prefix, name in FOLDERS.items():
        if path.startswith(prefix):
            return name
    return "other"


@dataclass(eq=False)  # a pytest plugin must stay hashable
class Recorder:
    """A pytest plugin that keeps each test's outcome by component."""

    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a test once: its call, or the setup or teardown that failed."""
        name = component(report.nodeid)
        if report.failed:
            self.outcomes[name]["failed"] += 1
            self.failures[name].append(f"{report.nodeid} ({report.when})")
        elif report.when == "call":
            self.outcomes[name][report.outcome] += 1
        elif report.skipped and report.when == "setup":
            self.outcomes[name]["skipped"] += 1

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A file that does not even import breaks its component."""
        if report.failed:
            name = component(report.nodeid)
            self.outcomes[name]["failed"] += 1
            self.failures[name].append(f"{report.nodeid} (collection)")


def versions() -> str:
    """``name version`` of the shown distributions installed."""
    found = []
    for name in SHOWN:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (absent)")
    return ", ".join(found)


def report(recorder: Recorder) -> bool:
    """Print one line per component (and the failing node ids); True when all are OK."""
    out = sys.stdout
    out.write(f"\nversions: {versions()}\n\n")
    healthy = True
    for name in sorted(recorder.outcomes):
        counts = recorder.outcomes[name]
        summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
        broke = name in recorder.failures
        healthy = healthy and not broke
        out.write(f"{name:26} {'BROKE' if broke else 'OK':6} ({summary})\n")
        for nodeid in recorder.failures.get(name, ()):
            out.write(f"    {nodeid}\n")
    return healthy


def main(argv: list[str]) -> int:
    """Run the tests, print the report; 0 when every component is OK."""
    recorder = Recorder()
    code = pytest.main([*TESTS, "-q", *argv], plugins=[recorder])
    healthy = report(recorder)
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        sys.stdout.write(f"pytest itself failed (exit {int(code)})\n")
        return 1
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
