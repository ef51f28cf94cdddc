"""The README's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs_offline() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README lost its example"
    result = subprocess.run(
        [sys.executable, "-c", blocks[0]], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "tool_start",
        "tool_result",
        "text_delta",
        "usage",
        "turn_complete",
    ]


def test_quick_start_has_exactly_two_commands() -> None:
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quick, flags=re.DOTALL)
    assert len(commands) == 2
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1].strip() in ci, ".ci/run must run the README's test command"
