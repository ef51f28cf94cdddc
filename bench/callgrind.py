"""Instructions per run under valgrind's callgrind, fixed costs cancelled.

A bench's child process (``script --child VARIANT``) warms up, then calls
``os.getppid()`` as a marker, runs ``few`` times, marker, ``many`` times,
marker. Callgrind dumps its counts at each marker (``--dump-before``), so the
second and third dumps hold the ``few`` and the ``many`` runs; their
difference over ``many - few`` is one run, without start-up or teardown.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["per_run"]


def per_run(script: str, variant: str, *, few: int, many: int) -> float:
    """Instructions of one run of ``variant`` (``script --child variant`` under callgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out}",
                sys.executable,
                script,
                "--child",
                variant,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        parts: list[int] = []
        for dump in (Path(f"{out}.2"), Path(f"{out}.3")):
            found = re.search(r"^summary: (\d+)", dump.read_text() if dump.exists() else "", re.M)
            parts.append(int(found.group(1)) if found else -1)
    if proc.returncode != 0 or min(parts) < 0:
        raise SystemExit(f"{variant} failed under valgrind:\n{proc.stderr[-2000:]}")
    return (parts[1] - parts[0]) / (many - few)
