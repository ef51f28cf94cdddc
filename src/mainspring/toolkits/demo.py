"""The offline coding demo: read a file, propose a patch, ask for approval, apply it.

``mainspring demo coding`` runs it in a fresh temporary workspace holding a
``calc.py`` whose ``add`` subtracts. The scripted model reads the file, sends
an ``apply_patch`` (which pauses with the diff in its pending action), and
reports what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mainspring.agent import Agent
from mainspring.messages import Message
from mainspring.models.base import Model, ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.toolkits.bundles import coding_tools

__all__ = ["CODING_MESSAGE", "coding_demo_agent", "seed_workspace"]

CODING_MESSAGE = "calc.add(2, 3) returns -1. Please fix it."

BUGGY = '''def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a - b
'''

PATCH = """*** Begin Patch
*** Update File: calc.py
@@ def add(a: int, b: int) -> int:
     \"\"\"The sum of a and b.\"\"\"
-    return a - b
+    return a + b
*** End Patch
"""


def seed_workspace(root: Path) -> None:
    """Put the buggy ``calc.py`` in ``root``."""
    (root / "calc.py").write_text(BUGGY)


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
    last = messages[-1]
    if last.role == "user":
        return ScriptedResponse(
            text="Let me look at calc.py.",
            tool_calls=[ScriptedCall("read_file", {"path": "calc.py"})],
        )
    result = last.tool_results_parts[0]
    if result.name == "read_file":
        if "a - b" not in result.content:
            return ScriptedResponse(text="calc.py already adds correctly.")
        return ScriptedResponse(
            text=" `add` subtracts; here is a patch.",
            tool_calls=[ScriptedCall("apply_patch", {"patch": PATCH})],
        )
    if result.is_error:
        return ScriptedResponse(text=f"The patch was not applied: {result.content}")
    return ScriptedResponse(text="Fixed: add now returns a + b.")


def coding_demo_agent(root: Path, *, model: Model | None = None) -> Agent:
    """The demo coding agent on ``root`` (offline unless ``model`` is given)."""
    return Agent(
        name="coder",
        instructions="You are a careful coding assistant. Read before you patch.",
        model=model or ScriptedModel(_script, name="scripted-coder", chunk_size=8),
        tools=coding_tools(root),
    )
