"""Discovery: walk ordered roots within bounds, parse SKILL.md front matter.

Nothing here raises for one bad file: it becomes a :class:`SkillDiagnostic`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

__all__ = [
    "SKILL_FILE",
    "Discovery",
    "Execution",
    "Skill",
    "SkillDiagnostic",
    "SkillDiagnosticCode",
    "SkillLimits",
    "discover",
    "read_capped",
]

SKILL_FILE = "SKILL.md"
Execution = Literal["inline", "subagent"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

SkillDiagnosticCode = Literal[
    "root",
    "duplicate",
    "depth",
    "count",
    "size",
    "total",
    "symlink",
    "escape",
    "unreadable",
    "front_matter",
    "yaml",
    "field",
    "entries",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLimits:
    """Bounds on discovery; whatever passes one becomes a diagnostic."""

    max_depth: int = 4
    """Folders below a root where a ``SKILL.md`` may sit (0: only the root itself)."""
    max_files: int = 200
    """``SKILL.md`` files read across all roots."""
    max_file_bytes: int = 256_000
    """Size of one ``SKILL.md`` or resource file."""
    max_total_bytes: int = 4_000_000
    """Bytes of ``SKILL.md`` read across all roots."""
    max_entries: int = 20_000
    """Directory entries looked at across all roots."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDiagnostic:
    """Why a file or folder was not (or not entirely) taken into the catalog."""

    path: Path
    code: SkillDiagnosticCode
    message: str
    line: int | None = None
    """1-based line in the file, where known."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill of the catalog."""

    id: str
    """``"<root index>:<folder relative to the root>"``; see the module docstring."""
    name: str
    description: str
    allowed_tools: tuple[str, ...] | None
    """Tool names or patterns the skill may use; ``None`` when it does not say."""
    execution: Execution
    path: Path
    """The ``SKILL.md`` file."""
    root: Path
    file_bytes: int
    body_bytes: int

    @property
    def folder(self) -> Path:
        """The folder holding ``SKILL.md`` and the skill's resources."""
        return self.path.parent


class _BadSkill(Exception):
    def __init__(
        self, code: Literal["front_matter", "yaml", "field"], message: str, line: int | None = None
    ) -> None:
        super().__init__(message)
        self.code: Literal["front_matter", "yaml", "field"] = code
        self.message = message
        self.line = line


@dataclass(slots=True)
class _Parsed:
    name: str
    description: str
    allowed_tools: tuple[str, ...] | None
    execution: Execution
    body: str


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _BadSkill("front_matter", "no YAML front matter: the file must start with '---'", 1)
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise _BadSkill("front_matter", "front matter is not closed by a '---' line", 1)


def _load_yaml(block: str) -> object:
    try:
        return yaml.safe_load(block)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else None  # 1-based, after the opening '---'
        problem = exc.problem or exc.context or "malformed"
        raise _BadSkill("yaml", f"invalid YAML front matter: {problem}", line) from None
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:
        raise _BadSkill("yaml", f"invalid YAML front matter: {exc}") from None


def _allowed_tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(x for x in re.split(r"[\s,]+", value) if x)
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return tuple(str(x) for x in value)
    raise _BadSkill("field", "'allowed-tools' must be a list of tool names or patterns")


def _parse(text: str) -> _Parsed:
    block, body = _split_front_matter(text)
    data = _load_yaml(block)
    if not isinstance(data, dict):
        raise _BadSkill("front_matter", "front matter must be a YAML mapping", 2)
    for key in ("name", "description"):
        if key not in data or data[key] is None:
            raise _BadSkill("field", f"missing required field {key!r}")
    name, description = data["name"], data["description"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _BadSkill(
            "field", f"'name' must be 1-64 letters, digits, '_', '.', ':' or '-': {name!r:.80}"
        )
    if not isinstance(description, str) or not description.strip():
        raise _BadSkill("field", "'description' must be a non-empty string")
    execution = data.get("execution", "inline")
    if execution not in ("inline", "subagent"):
        raise _BadSkill(
            "field", f"'execution' must be 'inline' or 'subagent', not {execution!r:.80}"
        )
    return _Parsed(
        name=name,
        description=description.strip(),
        allowed_tools=_allowed_tools(data.get("allowed-tools")),
        execution="subagent" if execution == "subagent" else "inline",
        body=body,
    )


def read_capped(path: Path, cap: int) -> bytes:
    """Read a regular file without following a final symlink; at most ``cap + 1`` bytes."""
    fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(cap + 1)


@dataclass(slots=True)
class Discovery:
    """One discovery pass over all roots: the skills, their bodies, the diagnostics."""

    limits: SkillLimits
    skills: dict[str, Skill] = field(default_factory=dict[str, Skill])
    bodies: dict[str, str] = field(default_factory=dict[str, str])
    diagnostics: list[SkillDiagnostic] = field(default_factory=list[SkillDiagnostic])
    files: int = 0
    total: int = 0
    entries: int = 0
    stopped: bool = False

    def _diag(
        self, path: Path, code: SkillDiagnosticCode, message: str, line: int | None = None
    ) -> None:
        self.diagnostics.append(SkillDiagnostic(path=path, code=code, message=message, line=line))

    def _root(self, index: int, given: Path) -> None:
        try:
            root = given.resolve(strict=True)
        except (OSError, RuntimeError):
            self._diag(given, "root", "skill root does not exist")
            return
        if not root.is_dir():
            self._diag(given, "root", "skill root is not a directory")
            return
        stack = [(root, 0)]
        while stack and not self.stopped:
            directory, depth = stack.pop()
            stack.extend(reversed(self._directory(index, root, directory, depth)))

    def _directory(
        self, index: int, root: Path, directory: Path, depth: int
    ) -> list[tuple[Path, int]]:
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self._diag(directory, "unreadable", f"cannot list folder: {exc.strerror or exc}")
            return []
        self.entries += len(entries)
        if self.entries > self.limits.max_entries:
            self._diag(
                directory,
                "entries",
                f"discovery stopped: more than {self.limits.max_entries} entries looked at",
            )
            self.stopped = True
            return []
        skill_md = next((e for e in entries if e.name == SKILL_FILE), None)
        if skill_md is not None:
            self._skill_file(index, root, Path(skill_md.path), depth)
            return []  # a skill's folder holds its resources, not more skills
        subdirs: list[tuple[Path, int]] = []
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if entry.is_dir():
                    self._reject_symlink(root, path)
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            if depth + 1 <= self.limits.max_depth:
                subdirs.append((path, depth + 1))
            elif os.path.lexists(path / SKILL_FILE):
                self._diag(
                    path / SKILL_FILE,
                    "depth",
                    f"deeper than max_depth={self.limits.max_depth} below its root",
                )
        return subdirs

    def _reject_symlink(self, root: Path, path: Path) -> None:
        try:
            inside = path.resolve().is_relative_to(root)
        except (OSError, RuntimeError):
            inside = False
        if inside:
            self._diag(path, "symlink", "symlinks are not followed")
        else:
            self._diag(path, "escape", "symlink points outside its skill root")

    def _skill_file(self, index: int, root: Path, path: Path, depth: int) -> None:
        try:
            st = os.lstat(path)
        except OSError as exc:
            self._diag(path, "unreadable", f"cannot stat: {exc.strerror or exc}")
            return
        if stat.S_ISLNK(st.st_mode):
            self._reject_symlink(root, path)
            return
        if not stat.S_ISREG(st.st_mode):
            self._diag(path, "unreadable", "not a regular file")
            return
        if not path.resolve().is_relative_to(root):
            self._diag(path, "escape", "resolves outside its skill root")
            return
        if self.files >= self.limits.max_files:
            self._diag(
                path,
                "count",
                f"discovery stopped: more than max_files={self.limits.max_files} skill files",
            )
            self.stopped = True
            return
        self.files += 1
        self._read(index, root, path, st.st_size)

    def _read(self, index: int, root: Path, path: Path, size: int) -> None:
        cap = self.limits.max_file_bytes
        if size > cap:
            self._diag(path, "size", f"{size} bytes is over max_file_bytes={cap}")
            return
        if self.total + size > self.limits.max_total_bytes:
            self._diag(
                path, "total", f"skipped: would pass max_total_bytes={self.limits.max_total_bytes}"
            )
            return
        try:
            data = read_capped(path, cap)
        except OSError as exc:
            self._diag(path, "unreadable", f"cannot read: {exc.strerror or exc}")
            return
        if len(data) > cap or self.total + len(data) > self.limits.max_total_bytes:
            self._diag(path, "size", "file grew past a byte bound while being read")
            return
        self.total += len(data)
        try:
            parsed = _parse(data.decode("utf-8"))
        except UnicodeDecodeError:
            self._diag(path, "unreadable", "not UTF-8 text")
            return
        except _BadSkill as exc:
            self._diag(path, exc.code, exc.message, exc.line)
            return
        self._add(index, root, path, len(data), parsed)

    def _add(self, index: int, root: Path, path: Path, size: int, parsed: _Parsed) -> None:
        winner = self.skills.get(parsed.name)
        if winner is not None:
            self._diag(
                path,
                "duplicate",
                f"skill {parsed.name!r} is already defined by {winner.path} "
                f"(id {winner.id}), which takes precedence",
            )
            return
        rel = path.parent.relative_to(root).as_posix()
        self.skills[parsed.name] = Skill(
            id=f"{index}:{rel}",
            name=parsed.name,
            description=parsed.description,
            allowed_tools=parsed.allowed_tools,
            execution=parsed.execution,
            path=path,
            root=root,
            file_bytes=size,
            body_bytes=len(parsed.body.encode("utf-8")),
        )
        self.bodies[parsed.name] = parsed.body


def discover(roots: Sequence[Path], limits: SkillLimits) -> Discovery:
    """Discover the skills under ``roots``; earlier roots win duplicate names."""
    found = Discovery(limits)
    for index, root in enumerate(roots):
        if found.stopped:
            break
        found._root(index, root)
    return found
