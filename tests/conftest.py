"""Shared fixtures: every async test runs on asyncio and on trio.

Tests that need a system binary or server skip with a reason starting
``"needs "``. Under CI (``MAINSPRING_CI=1``) such a skip is turned into a
failure, so CI always runs them.

Hypothesis runs with no per-example deadline: on a busy two-core machine a
deadline measures the machine, not the code. Tests bound their own waits
(``subprocess`` timeouts, server start-up timeouts); pytest-timeout's limit
in ``pyproject.toml`` only catches a wedged test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("mainspring", deadline=None)
settings.load_profile("mainspring")

pytest_plugins = ["tests.stores.servers", "tests.terminal"]

NEEDS_PREFIX = "needs "


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]  # a hookwrapper: pluggy's yielded result has no public type
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("MAINSPRING_CI") == "1":
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        if reason.removeprefix("Skipped: ").startswith(NEEDS_PREFIX):
            report.outcome = "failed"
            report.longrepr = f"under CI this must run, but it was skipped: {reason}"
