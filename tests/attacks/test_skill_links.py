"""Skill files that are other files' names, and instructions read by another spelling.

A resource (or a ``SKILL.md``) that is a hard link to a file outside the
skills root cannot be told from a file of the skill by its path: it is
refused on the opened handle (more than one link), with a clear error, and
the outside file's text never reaches the model. Reading a skill's
instructions by any spelling of the path (``./SKILL.md``,
``scripts/../SKILL.md``) is reading them: its ``allowed-tools`` become
active just as they do for ``SKILL.md``, so the spelling cannot dodge them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, ToolResult
from mainspring.errors import SkillPathError
from mainspring.skill_runner import SkillRunner
from mainspring.skills import SkillCatalog
from mainspring.tools import tool
from tests.helpers import send

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-OUTSIDE-THE-SKILLS-ROOT"
RAN: list[str] = []


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append(f"lookup {key}")
    return f"value of {key}"


@tool(permission="auto")
def delete_all() -> str:
    """Delete everything."""
    RAN.append("delete_all")
    return "deleted"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "skills"
    folder = root / "reader"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: reader\ndescription: Reads.\nallowed-tools: [lookup]\n---\nLook things up.\n"
    )
    (folder / "notes.md").write_text("plain notes")
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    RAN.clear()
    return root, secret


def test_a_resource_hard_linked_to_an_outside_file_is_refused(roots: tuple[Path, Path]) -> None:
    root, secret = roots
    os.link(secret, root / "reader" / "leak.txt")
    catalog = SkillCatalog([root])
    with pytest.raises(SkillPathError, match="hard links") as info:
        catalog.read_resource("reader", "leak.txt")
    assert SECRET not in str(info.value)
    assert info.value.path == "leak.txt"
    # The skill's own files still read.
    assert catalog.read_resource("reader", "notes.md").text == "plain notes"
    assert secret.read_text() == SECRET  # nothing was changed


def test_a_skill_md_hard_linked_to_an_outside_file_is_a_diagnostic(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(f"---\nname: planted\ndescription: {SECRET}\n---\nbody\n")
    folder = tmp_path / "skills" / "planted"
    folder.mkdir(parents=True)
    os.link(outside, folder / "SKILL.md")
    catalog = SkillCatalog([tmp_path / "skills"])
    assert catalog.skills == ()
    (diagnostic,) = catalog.diagnostics
    assert "hard links" in diagnostic.message


async def test_the_model_gets_an_error_result_for_a_hard_linked_resource(
    roots: tuple[Path, Path],
) -> None:
    root, secret = roots
    os.link(secret, root / "reader" / "scripts" / "leak.txt")
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[
                    ScriptedCall("skills_read", {"name": "reader", "path": "scripts/leak.txt"})
                ]
            ),
            "done",
        ]
    )
    runner = SkillRunner(SkillCatalog([root]), agent=Agent(model=model, tools=[lookup]))
    events = await send(Session(runner.host()), "read it")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "hard links" in result.content
    assert not any(SECRET in str(r) for r in model.requests)


@pytest.mark.parametrize("path", ["./SKILL.md", "scripts/../SKILL.md", ".//SKILL.md", "SKILL.md/"])
async def test_any_spelling_of_skill_md_activates_its_allowed_tools(
    roots: tuple[Path, Path], path: str
) -> None:
    root, _ = roots
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("skills_read", {"name": "reader", "path": path})]
            ),
            ScriptedResponse(
                tool_calls=[ScriptedCall("delete_all", {}), ScriptedCall("lookup", {"key": "k"})]
            ),
            "done",
        ]
    )
    agent = Agent(model=model, tools=[lookup, delete_all])
    events = await send(Session(SkillRunner(SkillCatalog([root]), agent=agent).host()), "go")
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert "Look things up." in results["skills_read"].content
    assert "skill 'reader' is active" in results["skills_read"].content
    assert results["delete_all"].is_error
    assert RAN == ["lookup k"], "the tool outside allowed-tools never ran"


@pytest.mark.parametrize("path", ["../reader/SKILL.md", "scripts/../../SKILL.md", "/SKILL.md"])
def test_a_path_that_climbs_out_of_the_skill_is_still_refused(
    roots: tuple[Path, Path], path: str
) -> None:
    root, _ = roots
    catalog = SkillCatalog([root])
    with pytest.raises(SkillPathError, match="inside the skill's folder"):
        catalog.read_resource("reader", path)
    assert not catalog.is_instructions(path)
