"""Every ``type: ignore`` in the project's Python names its error code and says why.

The form is ``# type: ignore[code]  # reason``: the code keeps the ignore from
hiding a second, unrelated error on the line (mypy runs with
``ignore-without-code`` too), and the reason tells the next reader whether the
ignore may go. In ``tests/`` most ignores are wrong-type inputs given on
purpose; they say so too.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("src", "bench", "tests", "examples")

_IGNORE = re.compile(r"type:\s*ignore")
_EXPLAINED = re.compile(r"type:\s*ignore\[[a-z0-9-]+(?:,\s*[a-z0-9-]+)*\]\s+#\s*\S")


def unexplained(source: str) -> list[int]:
    """The lines of ``source`` whose ``type: ignore`` comment lacks a code or a reason."""
    found: list[int] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT or not _IGNORE.search(token.string):
            continue
        if not _EXPLAINED.search(token.string):
            found.append(token.start[0])
    return found


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("x = f()  # type: ignore\n", True),
        ("x = f()  # type: ignore[arg-type]\n", True),
        ("x = f()  # type: ignore[arg-type]  #\n", True),
        ("x = f()  # type:ignore[misc]\n", True),
        ("x = f()  # type: ignore[arg-type]  # the SDK's stubs are wrong\n", False),
        ("x = f()  # type: ignore[attr-defined, misc]  # set by @dataclass\n", False),
        ('x = "# type: ignore"\n', False),  # a string, not a comment
    ],
)
def test_the_checker_tells_an_explained_ignore_from_a_bare_one(line: str, flagged: bool) -> None:
    assert bool(unexplained(line)) is flagged


def test_every_ignore_has_a_code_and_a_reason() -> None:
    bare: list[str] = []
    files = [p for folder in CHECKED for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 100  # the walk found the code
    for path in files:
        bare.extend(
            f"{path.relative_to(ROOT)}:{n}" for n in unexplained(path.read_text(encoding="utf-8"))
        )
    assert not bare, "give these ignores '[code]  # reason' (or type the line): " + ", ".join(bare)
