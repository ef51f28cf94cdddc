"""Node packages for the tests that drive clients written by others, installed once.

Each package is npm-installed into a cache folder the first time a test needs
it. Under pytest-xdist several workers may need it at once: the install runs
under a file lock beside the folder, so one worker installs and the others
wait for it, then find the package in place (never a half-written
``node_modules``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

INSTALL_TIMEOUT = 600.0
"""Seconds one ``npm install`` may take (a bound that only catches a hang)."""


def npm_install(prefix: Path, package: str | Sequence[str], marker: Path) -> str | None:
    """Install ``package`` into ``prefix`` unless ``marker`` exists; why not, or ``None``.

    Args:
        prefix: The folder npm installs into (``npm install --prefix``).
        package: The package spec (``"ai@6"``), or several installed together.
        marker: A file present once the package is installed.

    Returns:
        ``None`` when the package is in place, else why it is not (for a skip).
    """
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        return "node and npm are not installed (apt-get install nodejs npm)"
    prefix.mkdir(parents=True, exist_ok=True)
    # Another worker's install finishes (or fails) before this one looks.
    with FileLock(str(prefix.with_name(prefix.name + ".lock"))):
        if marker.exists():
            return None
        specs = [package] if isinstance(package, str) else list(package)
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *specs],
            capture_output=True,
            text=True,
            check=False,
            timeout=INSTALL_TIMEOUT,
        )
        if done.returncode != 0 or not marker.exists():
            return f"npm install {' '.join(specs)} failed: {done.stderr.strip()[-300:]}"
    return None
