"""Skills: a bounded catalog of ``SKILL.md`` playbooks, and the tools that read it.

A skill is a folder holding a ``SKILL.md`` file: YAML front matter, then a
markdown body the model follows::

    ---
    name: pdf-forms
    description: Fill in PDF forms from a table of values.
    allowed-tools: [read_file, "shell*"]
    execution: inline            # or: subagent
    ---
    1. Read the form with ...

Other files in the folder are the skill's resources, read by a path relative
to it. Skills are discovered under ordered roots; an earlier root wins a
duplicate name and the loser becomes a diagnostic. Discovery is bounded
(:class:`SkillLimits`); a file that breaks a bound, a symlink, a path that
escapes its root or bad front matter becomes a :class:`SkillDiagnostic`,
never an exception. Dot-folders (``.git``) are not searched, and a skill's
folder is not searched for further skills. A ``SKILL.md`` below ``max_depth``
is not loaded but reported (``"depth"``). Front matter is parsed by PyYAML's
safe loader, bounded: aliases are refused (no expansion blow-up), at most
2,000 values nested at most 32 deep, and a tag it cannot construct is the
file's diagnostic. Every file is opened by walking from its root through
directory handles with ``O_NOFOLLOW`` (the file itself ``O_NONBLOCK``) and
checked by ``fstat`` on the opened handle: a folder swapped for a symlink or a
``SKILL.md`` swapped for a FIFO after discovery looked is refused, not
followed or waited on.

A skill's ``id`` is ``"<root index>:<folder relative to the root>"``
(``"0:pdf/forms"``; ``"0:."`` for a ``SKILL.md`` at the root itself): stable
while the roots and the layout stay, and distinct even for the duplicate that
lost. Tools and prompts address skills by ``name``.
"""

from mainspring.skills.catalog import (
    SkillCatalog,
    SkillNeeds,
    SkillNotFound,
    SkillPathError,
    TextPage,
)
from mainspring.skills.discovery import (
    SKILL_FILE,
    Execution,
    Skill,
    SkillDiagnostic,
    SkillDiagnosticCode,
    SkillLimits,
)

__all__ = [
    "SKILL_FILE",
    "Execution",
    "Skill",
    "SkillCatalog",
    "SkillDiagnostic",
    "SkillDiagnosticCode",
    "SkillLimits",
    "SkillNeeds",
    "SkillNotFound",
    "SkillPathError",
    "TextPage",
]
