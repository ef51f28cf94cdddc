"""The public surface: what users import, and the testing helpers they get."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mainspring import ErrorEvent, PendingAction, StreamStarted, TextDelta, TurnComplete
from mainspring.testing import check_events

ROOT = Path(__file__).resolve().parent.parent
# The modules an application may import from: the package and its subpackages'
# __init__s (plus the documented helpers). Everything else is implementation.
PUBLIC = {
    "mainspring",
    "mainspring.audit",
    "mainspring.context",
    "mainspring.demo",
    "mainspring.devtools",
    "mainspring.engine",
    "mainspring.evals",
    "mainspring.engine.signing",  # SigningKey: the Ed25519 keys (the remote extra's module)
    "mainspring.mcp",
    "mainspring.messages",
    "mainspring.models",
    "mainspring.pipelines",
    "mainspring.server",
    "mainspring.skills",
    "mainspring.stores",
    "mainspring.testing",
    "mainspring.toolkits",
    "mainspring.tools",
}


def imported_modules(text: str) -> set[str]:
    """The mainspring modules ``text`` imports (not another package named ``mainspring_…``)."""
    module = r"(mainspring(?:\.[\w.]+)?)\b"
    found = set(re.findall(rf"^\s*from {module} import", text, flags=re.MULTILINE))
    found |= set(re.findall(rf"^\s*import {module}", text, flags=re.MULTILINE))
    return found


def user_facing_code() -> dict[str, str]:
    """The README's code blocks, docs and examples: what a user copies."""
    texts = {
        "README.md": "\n".join(
            re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
        )
    }
    for path in [*(ROOT / "examples").rglob("*.py"), *(ROOT / "docs").rglob("*.md")]:
        texts[str(path.relative_to(ROOT))] = path.read_text()
    return texts


def test_the_checker_sees_a_private_import() -> None:
    assert imported_modules(
        "from mainspring._run.loop import Loop\nimport mainspring.session\n"
    ) == {
        "mainspring._run.loop",
        "mainspring.session",
    }


def test_the_checker_leaves_other_packages_alone() -> None:
    text = "from mainspring_finance.ledger import Ledger\nimport mainspring_finance\n"
    assert imported_modules(text + "from mainspring import Agent\nimport mainspring\n") == {
        "mainspring"
    }


def test_user_facing_code_imports_only_public_modules() -> None:
    private = {
        (where, module)
        for where, text in user_facing_code().items()
        for module in imported_modules(text)
        if module not in PUBLIC
    }
    assert not private, f"user-facing code imports implementation modules: {sorted(private)}"


def test_every_public_module_has_a_sorted_complete_all() -> None:
    import importlib

    for name in sorted(PUBLIC):
        module = importlib.import_module(name)
        exported = list(module.__all__)
        # isort-style, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
        order = sorted(exported, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
        assert exported == order, f"{name}.__all__ is not sorted"
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it lacks: {missing}"


# --- deprecated names: still imported, with a warning naming the new one ---------------


@pytest.mark.parametrize(
    ("package", "new"),
    [("mainspring.toolkits", "FileWorkspace"), ("mainspring.pipelines", "PipelineWorkspace")],
)
def test_an_old_workspace_name_still_imports_and_warns(package: str, new: str) -> None:
    import importlib

    module = importlib.import_module(package)
    message = rf"{package}\.Workspace is deprecated: use {package}\.{new}"
    with pytest.warns(DeprecationWarning, match=message) as caught:
        old = module.Workspace
    assert old is getattr(module, new)
    assert caught[0].filename == __file__  # the warning points at the user's line
    assert "Workspace" not in module.__all__  # a star import neither warns nor gets it
    with pytest.raises(AttributeError, match="has no attribute 'Workspaces'"):
        _ = module.Workspaces


def test_the_old_names_work_in_a_from_import() -> None:
    from mainspring.pipelines import PipelineWorkspace
    from mainspring.toolkits import FileWorkspace

    with pytest.warns(DeprecationWarning, match="FileWorkspace"):
        from mainspring.toolkits import Workspace as OldFileWorkspace
    with pytest.warns(DeprecationWarning, match="PipelineWorkspace"):
        from mainspring.pipelines import Workspace as OldPipelineWorkspace
    assert OldFileWorkspace is FileWorkspace
    assert OldPipelineWorkspace is PipelineWorkspace


# --- mainspring.testing.check_events --------------------------------------------------

DONE = TurnComplete(stop_reason="end_turn")
PAUSED = TurnComplete(stop_reason="pending_action")
PENDING = PendingAction(
    attempt_id="a", tool_use_id="c", turn_index=1, name="pay", input={}, description="Pay."
)
START = StreamStarted(stream_id="s", session_id="x")
TEXT = TextDelta(text="hi")


@pytest.mark.parametrize(
    "events",
    [
        [TEXT, DONE],
        [START, TEXT, DONE],
        [TEXT, PENDING, PAUSED],
        [ErrorEvent(code="x", message="y")],
    ],
)
def test_well_formed_streams_pass(events: list[object]) -> None:
    check_events(events)  # type: ignore[arg-type]  # plain objects: the checker takes whatever a stream yields


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([TEXT], "exactly one terminal"),
        ([DONE, DONE], "exactly one terminal"),
        ([DONE, TEXT], "must be last"),
        ([TEXT, START, DONE], "stream_started"),
        ([PENDING, TEXT, PAUSED], "paused stream"),
        ([PENDING, DONE], "did not pause"),
    ],
)
def test_malformed_streams_are_caught(events: list[object], problem: str) -> None:
    with pytest.raises(AssertionError, match=problem):
        check_events(events)  # type: ignore[arg-type]  # plain objects: the checker takes whatever a stream yields
