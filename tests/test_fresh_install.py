"""The README's Quick start, as a new user runs it: a fresh virtualenv, nothing shared.

Slow (each installs the package from scratch), so each is ``nightly``: CI's
``.ci/run`` runs the Quick start's very commands in a clean clone anyway (the
demo's in a fresh clone with the core dependencies only, checking the same
output). The last installs the built wheel, not the checkout: the finance
example ships in it as a package of its own, which ``mainspring demo finance``
imports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def quick_start_commands() -> list[str]:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"```bash\n(.*?)```", quick, flags=re.DOTALL)]


def sh(command: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix)
    )
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def checkout(tmp_path: Path) -> Path:
    """A copy of the checkout (so the venv a command makes is fresh and its own)."""
    work = tmp_path / "checkout"
    copied = sh(
        f"mkdir -p {work} && git -C {ROOT} ls-files -z --cached --others --exclude-standard"
        f" | (cd {ROOT} && xargs -0 cp --parents -t {work})",
        cwd=tmp_path,
        timeout=120,
    )
    assert copied.returncode == 0, copied.stderr
    return work


@pytest.mark.nightly
def test_the_demo_command_works_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    demo, _ = quick_start_commands()
    first = sh(demo, cwd=checkout(tmp_path), timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "send_payment" in first.stdout and "turn complete (end_turn)" in first.stdout


@pytest.mark.nightly
def test_the_test_command_collects_the_suite_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    _, tests = quick_start_commands()
    # The test command, up to collecting the suite (running it is this very run's job).
    collect = tests.replace("python -m pytest", "python -m pytest --collect-only -q")
    second = sh(collect, cwd=checkout(tmp_path), timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert re.search(r"\d+ tests collected", second.stdout), second.stdout[-2000:]


@pytest.mark.nightly
def test_the_finance_demo_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    """The finance example ships in the wheel as a package of its own (not from a checkout)."""
    work, venv, elsewhere = checkout(tmp_path), tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = (
        f"python3 -m venv {venv} && . {venv}/bin/activate"
        f" && pip wheel -q --no-deps -w {tmp_path / 'dist'} {work}"
        f" && pip install -q {tmp_path / 'dist'}/mainspring-*.whl"
        " && mainspring demo finance --yes"
    )
    ran = sh(command, cwd=elsewhere, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "→ swap(" in ran.stdout and "turn complete (end_turn)" in ran.stdout
