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
from yaml.composer import ComposerError

from mainspring.skills._handles import Refused, read_under

__all__ = [
    "SKILL_FILE",
    "Discovery",
    "Execution",
    "Skill",
    "SkillDiagnostic",
    "SkillDiagnosticCode",
    "SkillLimits",
    "discover",
]

SKILL_FILE = "SKILL.md"
Execution = Literal["inline", "subagent"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_MAX_YAML_NODES = 2_000
"""Scalars, lists and mappings a front matter may hold."""
_MAX_YAML_DEPTH = 32
"""How deeply its lists and mappings may nest."""

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
    requires_tools: tuple[str, ...] = ()
    """Tool names or patterns the skill needs (``dependencies: {tools: …}``)."""
    requires_servers: tuple[str, ...] = ()
    """MCP servers the skill needs (``dependencies: {mcp-servers: …}``)."""

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
    requires_tools: tuple[str, ...] = ()
    requires_servers: tuple[str, ...] = ()


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _BadSkill("front_matter", "no YAML front matter: the file must start with '---'", 1)
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise _BadSkill("front_matter", "front matter is not closed by a '---' line", 1)


class _FrontMatterLoader(yaml.SafeLoader):
    """PyYAML's safe loader with bounds: no aliases, few nodes, shallow nesting.

    An alias (``*name``) is refused outright: the safe loader shares the
    anchored node, but anything that walks the result (a dump, a copy, a
    comparison) pays for the expansion, which grows exponentially with nested
    aliases. Only the standard tags of the safe loader construct anything; any
    other tag is a diagnostic (PyYAML's ``ConstructorError``).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
        mark: yaml.error.Mark | None = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, "aliases (*name) are not allowed in front matter", mark)
        self._nodes += 1
        if self._nodes > _MAX_YAML_NODES:
            raise ComposerError(
                None, None, f"more than {_MAX_YAML_NODES} values in front matter", mark
            )
        self._depth += 1
        try:
            if self._depth > _MAX_YAML_DEPTH:
                raise ComposerError(
                    None, None, f"nested deeper than {_MAX_YAML_DEPTH} levels", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load_yaml(block: str) -> object:
    loader: _FrontMatterLoader | None = None
    try:
        loader = _FrontMatterLoader(block)  # its reader already refuses unprintable text
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else None  # 1-based, after the opening '---'
        problem = exc.problem or exc.context or "malformed"
        raise _BadSkill("yaml", f"invalid YAML front matter: {problem}", line) from None
    except Exception as exc:
        # PyYAML's constructors raise what they meet on a bad tagged value
        # (``!!timestamp 'x'`` is an AttributeError): any of it is this file's fault.
        raise _BadSkill(
            "yaml", f"invalid YAML front matter: {str(exc) or type(exc).__name__}"[:300]
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _allowed_tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(x for x in re.split(r"[\s,]+", value) if x)
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return tuple(str(x) for x in value)
    raise _BadSkill("field", "'allowed-tools' must be a list of tool names or patterns")


def _names(value: object, label: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return tuple(str(x) for x in value)
    raise _BadSkill("field", f"{label!r} must be a list of names")


def _dependencies(value: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if value is None:
        return (), ()
    if not isinstance(value, dict) or not set(value) <= {"tools", "mcp-servers"}:
        raise _BadSkill(
            "field", "'dependencies' must be a mapping with 'tools' and/or 'mcp-servers' lists"
        )
    tools = _names(value.get("tools"), "dependencies.tools")
    return tools, _names(value.get("mcp-servers"), "dependencies.mcp-servers")


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
    requires_tools, requires_servers = _dependencies(data.get("dependencies"))
    return _Parsed(
        name=name,
        description=description.strip(),
        allowed_tools=_allowed_tools(data.get("allowed-tools")),
        execution="subagent" if execution == "subagent" else "inline",
        body=body,
        requires_tools=requires_tools,
        requires_servers=requires_servers,
    )


@dataclass(slots=True)
class Discovery:
    """One discovery pass over all roots: the skills, their bodies, the diagnostics."""

    limits: SkillLimits
    skills: dict[str, Skill] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)
    diagnostics: list[SkillDiagnostic] = field(default_factory=list)
    files: int = 0
    total: int = 0
    entries: int = 0
    stopped: bool = False
    deep_entries: int = 0
    """Entries looked at below ``max_depth`` (only to report skills there), bounded apart."""

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
        deep = depth > self.limits.max_depth
        if deep and self.deep_entries > self.limits.max_entries:
            return []
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self._diag(directory, "unreadable", f"cannot list folder: {exc.strerror or exc}")
            return []
        if not self._count(directory, len(entries), deep=deep):
            return []
        skill_md = next((e for e in entries if e.name == SKILL_FILE), None)
        if skill_md is not None:
            if deep:
                self._diag(
                    Path(skill_md.path),
                    "depth",
                    f"not loaded: deeper than max_depth={self.limits.max_depth} below its root",
                )
            else:
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
            if entry.is_dir(follow_symlinks=False):
                # Below max_depth the walk goes on (within max_entries) only to
                # report the skills it will not load.
                subdirs.append((path, depth + 1))
        return subdirs

    def _count(self, directory: Path, entries: int, *, deep: bool) -> bool:
        """Count entries against ``max_entries``; ``False`` once a bound is passed."""
        limit = self.limits.max_entries
        if deep:
            self.deep_entries += entries
            if self.deep_entries <= limit:
                return True
            self._diag(
                directory,
                "entries",
                f"stopped looking below max_depth={self.limits.max_depth}: "
                f"more than {limit} entries there",
            )
            return False
        self.entries += entries
        if self.entries <= limit:
            return True
        self._diag(directory, "entries", f"discovery stopped: more than {limit} entries looked at")
        self.stopped = True
        return False

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
            data = read_under(root, path.relative_to(root).parts, cap)
        except Refused as exc:
            code: SkillDiagnosticCode = "symlink" if exc.symlink else "unreadable"
            self._diag(path, code, f"refused when opened: {exc.strerror}")
            return
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
            requires_tools=parsed.requires_tools,
            requires_servers=parsed.requires_servers,
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
