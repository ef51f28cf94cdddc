"""Workspace tools: an agent reads files it is confined to and patches one after approval.

Run it from the repository root:

    python examples/workspace-tools/main.py

It works on a throw-away copy of a tiny project in a temporary folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

from mainspring import Agent, Approve, ScriptedCall, ScriptedModel, ScriptedResponse, Session
from mainspring.testing import collect, pending_of
from mainspring.toolkits import PREVIEW_SOURCE, patch_tools, readonly_file_tools

PATCH = """\
*** Begin Patch
*** Update File: greet.py
@@
 def greet(name):
-    return "hello " + name
+    return f"hello, {name}!"
*** End Patch
"""


def scripted_model() -> ScriptedModel:
    """Two reads in one step (one tries to leave the workspace), a patch, an answer."""
    reads = [
        ScriptedCall("read_file", {"path": "greet.py"}),
        ScriptedCall("read_file", {"path": "../outside.txt"}),
    ]
    return ScriptedModel(
        [
            ScriptedResponse(tool_calls=reads),
            ScriptedResponse(tool_calls=[ScriptedCall("apply_patch", {"patch": PATCH})]),
            "greet() now punctuates properly.",
        ]
    )


async def main(root: Path) -> None:
    """Confine the tools to ``root``, run the turn, approve the patch."""
    (root / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
    (root.parent / "outside.txt").write_text("not for the agent\n")
    model = scripted_model()
    session = Session(Agent(model=model, tools=[*readonly_file_tools(root), *patch_tools(root)]))

    events = await collect(session.send("Make greet() friendlier"))
    for result in model.requests[1].messages[-1].tool_results_parts:  # what the model was told
        print(f"{'refused' if result.is_error else 'read'}: {result.content.splitlines()[0]}")
    pending = pending_of(events)  # reads ran at once; the patch waits, with its diff
    print(f"\n{pending.name} waits for approval:")
    print(next(f.message for f in pending.findings if f.source == PREVIEW_SOURCE))

    await collect(session.resume(pending.attempt_id, Approve()))
    print(f"\nafter approval, greet.py is:\n{(root / 'greet.py').read_text()}", end="")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "project").mkdir()
        anyio.run(main, Path(folder) / "project")
