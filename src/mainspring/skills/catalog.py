"""The skill catalog: lookup, paged reads, resources, tools and the resident block."""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import Field

from mainspring.errors import SkillNotFound, SkillPathError
from mainspring.skills._handles import Refused, read_under
from mainspring.skills.discovery import (
    SKILL_FILE,
    Discovery,
    Skill,
    SkillDiagnostic,
    SkillLimits,
    discover,
)
from mainspring.tools.define import Tool, ToolOutput, tool
from mainspring.tools.registry import matches

__all__ = ["SkillCatalog", "SkillNeeds", "SkillNotFound", "SkillPathError", "TextPage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillNeeds:
    """What a skill needs that the host does not have (found by :meth:`SkillCatalog.preflight`).

    Nothing is ever installed: a skill with needs is reported, and not run.
    """

    skill: str
    missing_tools: tuple[str, ...] = ()
    """Names or patterns (``dependencies.tools``, ``allowed-tools``) no host tool matches."""
    missing_servers: tuple[str, ...] = ()
    """``dependencies.mcp-servers`` the host is not connected to."""

    def __str__(self) -> str:
        parts = []
        if self.missing_tools:
            parts.append("tools " + ", ".join(self.missing_tools))
        if self.missing_servers:
            parts.append("MCP servers " + ", ".join(self.missing_servers))
        return f"skill {self.skill!r} needs " + " and ".join(parts) + " (not available here)"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPage:
    """One page of a text, by characters."""

    text: str
    offset: int
    total: int
    next_offset: int | None
    """Where the next page starts; ``None`` at the end."""


def _page(text: str, offset: int, limit: int) -> TextPage:
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1")
    if offset > len(text):
        raise ValueError(f"offset {offset} is past the end ({len(text)} characters)")
    end = min(len(text), offset + limit)
    return TextPage(
        text=text[offset:end],
        offset=offset,
        total=len(text),
        next_offset=end if end < len(text) else None,
    )


def _one_line(text: str, max_chars: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= max_chars else line[: max_chars - 1] + "…"


_DEFAULT_LIMITS = SkillLimits()


class SkillCatalog:
    """Skills discovered under ordered roots; loaded on first use.

    Loading reads files (blocking): in async code call :meth:`load` through
    ``anyio.to_thread.run_sync``. The tools from :meth:`tools` run in a thread.
    """

    def __init__(
        self, roots: Sequence[str | os.PathLike[str]], *, limits: SkillLimits = _DEFAULT_LIMITS
    ) -> None:
        self.roots = tuple(Path(r) for r in roots)
        self.limits = limits
        self._lock = threading.Lock()
        self._scan: Discovery | None = None

    def load(self) -> SkillCatalog:
        """Discover the skills, unless already loaded."""
        with self._lock:
            if self._scan is None:
                self._scan = discover(self.roots, self.limits)
            return self

    def reload(self) -> SkillCatalog:
        """Discover the skills again now."""
        self.invalidate()
        return self.load()

    def invalidate(self) -> None:
        """Forget what was loaded; the next use discovers again."""
        with self._lock:
            self._scan = None

    def _loaded(self) -> Discovery:
        scan = self._scan
        return scan if scan is not None else self.load()._loaded()

    @property
    def skills(self) -> tuple[Skill, ...]:
        """The skills, in root order, then path order."""
        return tuple(self._loaded().skills.values())

    @property
    def diagnostics(self) -> tuple[SkillDiagnostic, ...]:
        """What discovery skipped, and why."""
        return tuple(self._loaded().diagnostics)

    def get(self, name: str) -> Skill | None:
        """The skill with this name, if any."""
        return self._loaded().skills.get(name)

    def _skill(self, name: str) -> Skill:
        skill = self.get(name)
        if skill is None:
            raise SkillNotFound(f"no skill named {name!r}", name=name)
        return skill

    def preflight(self, tools: Iterable[str], servers: Iterable[str] = ()) -> dict[str, SkillNeeds]:
        """The skills needing tools or MCP servers the host lacks, by name.

        ``tools`` are the host's tool names, ``servers`` its connected MCP
        servers. A skill needs every ``dependencies.tools`` entry and every
        ``allowed-tools`` entry (each a name or ``*`` pattern, matched by at
        least one host tool) and every ``dependencies.mcp-servers`` name.
        """
        have = list(tools)
        connected = set(servers)
        found: dict[str, SkillNeeds] = {}
        for skill in self.skills:
            wanted = dict.fromkeys((*skill.requires_tools, *(skill.allowed_tools or ())))
            missing_tools = tuple(p for p in wanted if not any(matches(p, t) for t in have))
            missing_servers = tuple(s for s in skill.requires_servers if s not in connected)
            if missing_tools or missing_servers:
                found[skill.name] = SkillNeeds(
                    skill=skill.name, missing_tools=missing_tools, missing_servers=missing_servers
                )
        return found

    def search(self, query: str = "") -> list[Skill]:
        """Skills whose name or description contains every word of ``query`` (any case)."""
        words = query.casefold().split()
        return [
            s
            for s in self.skills
            if all(w in f"{s.name}\n{s.description}".casefold() for w in words)
        ]

    def read(self, name: str, offset: int = 0, limit: int = 20_000) -> TextPage:
        """A page of a skill's body (the markdown after the front matter), by characters.

        Raises:
            SkillNotFound: no skill has this name.
            ValueError: ``offset`` is negative or past the end, or ``limit`` < 1.
        """
        self._skill(name)
        return _page(self._loaded().bodies[name], offset, limit)

    def read_resource(
        self, name: str, relative_path: str, *, offset: int = 0, limit: int = 20_000
    ) -> TextPage:
        """A page of a text file in the skill's folder; ``"SKILL.md"`` pages the body.

        Raises:
            SkillNotFound: no skill has this name.
            SkillPathError: the path is absolute or climbs out of the skill's folder
                (``..``), passes a symlink, or is missing, not a file, a file with
                several hard links, too large or not UTF-8.
            ValueError: ``offset`` is negative or past the end, or ``limit`` < 1.
        """
        skill = self._skill(name)
        parts = self._resource_parts(name, relative_path)
        if parts == (SKILL_FILE,):
            return self.read(name, offset, limit)
        # Walked from the root by handles: a folder of the skill swapped for a
        # symlink since discovery, or a file swapped for a FIFO, is refused here.
        below_root = (*skill.folder.relative_to(skill.root).parts, *parts)
        try:
            data = read_under(skill.root, below_root, self.limits.max_file_bytes)
        except Refused as exc:
            what = "passes a symlink" if exc.symlink else f"is not a file of skill {name!r}"
            if exc.errno == errno.EMLINK and not exc.symlink:
                what = f"is refused: {exc.strerror}"
            raise SkillPathError(
                f"{relative_path!r} {what}", name=name, path=relative_path
            ) from None
        except OSError as exc:
            raise SkillPathError(
                f"cannot read {relative_path!r} of skill {name!r}: {exc.strerror or exc}",
                name=name,
                path=relative_path,
            ) from None
        if len(data) > self.limits.max_file_bytes:
            raise SkillPathError(
                f"{relative_path!r} is over {self.limits.max_file_bytes} bytes",
                name=name,
                path=relative_path,
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillPathError(
                f"{relative_path!r} is not UTF-8 text", name=name, path=relative_path
            ) from None
        return _page(text, offset, limit)

    @staticmethod
    def is_instructions(relative_path: str) -> bool:
        """Whether ``relative_path`` names a skill's ``SKILL.md``, however it is spelled.

        ``./SKILL.md`` and ``scripts/../SKILL.md`` name it as ``SKILL.md`` does:
        reading any of them is reading the skill's instructions.
        """
        try:
            return SkillCatalog._resource_parts("", relative_path) == (SKILL_FILE,)
        except SkillPathError:
            return False

    @staticmethod
    def _resource_parts(name: str, relative_path: str) -> tuple[str, ...]:
        """The path's components, normalized lexically (``.`` dropped, ``..`` applied).

        A ``..`` is applied to the components before it, never resolved on disk:
        the file is then opened by handles from the skill's folder down, so the
        path can only name a file inside it; one that climbs above it is refused.
        """
        pure = PurePosixPath(relative_path.replace("\\", "/"))
        parts: list[str] = []
        escapes = False
        for part in pure.parts:
            if part == "..":
                escapes = escapes or not parts
                if parts:
                    parts.pop()
            elif part != ".":
                parts.append(part)
        if (
            not parts
            or escapes
            or "\x00" in relative_path
            or pure.is_absolute()
            or re.match(r"^[A-Za-z]:", relative_path)
        ):
            raise SkillPathError(
                f"{relative_path!r} must be a path inside the skill's folder",
                name=name,
                path=relative_path,
            )
        return tuple(parts)

    def resident_block(self, *, max_bytes: int = 4_000, max_description_chars: int = 200) -> str:
        """A system-prompt block listing the skills, at most ``max_bytes`` UTF-8 bytes.

        When cut, it ends by saying how many skills were left out; ``""`` when
        there are no skills or not even that note fits.
        """
        skills = self.skills
        if not skills:
            return ""
        head = "<skills>\nSkills you can follow (read one with skills_read before using it):\n"
        tail = "</skills>"
        lines = [f"- {s.name}: {_one_line(s.description, max_description_chars)}\n" for s in skills]

        def size(parts: list[str]) -> int:
            return len("".join(parts).encode("utf-8"))

        if size([head, *lines, tail]) <= max_bytes:
            return "".join([head, *lines, tail])

        def note(left: int) -> str:
            return f"(+{left} more not shown; find them with skills_list)\n"

        kept: list[str] = []
        for line in lines:
            if size([head, *kept, line, note(len(lines) - len(kept) - 1), tail]) > max_bytes:
                break
            kept.append(line)
        block = "".join([head, *kept, note(len(lines) - len(kept)), tail])
        return block if size([block]) <= max_bytes else ""

    def tools(self, *, needs: Mapping[str, SkillNeeds] | None = None) -> list[Tool]:
        """``skills_list`` and ``skills_read``, read-only tools over this catalog.

        With ``needs`` (from :meth:`preflight`), ``skills_list`` marks each
        skill that cannot run here with what it lacks.
        """
        catalog = self
        lacking = dict(needs or {})

        @tool(read_only=True)
        def skills_list(
            query: str = "",
            offset: Annotated[int, Field(ge=0)] = 0,
            limit: Annotated[int, Field(ge=1, le=100)] = 20,
        ) -> ToolOutput:
            """List the skills (playbooks to follow), optionally filtered.

            Args:
                query: Words that must all appear in a skill's name or description (any case).
                offset: Index of the first skill to return.
                limit: How many skills to return.
            """
            found = catalog.search(query)
            page = found[offset : offset + limit]
            end = offset + len(page)
            result = {
                "total": len(found),
                "offset": offset,
                "next_offset": end if end < len(found) else None,
                "skills": [
                    {
                        "name": s.name,
                        "description": s.description,
                        "execution": s.execution,
                        **({"allowed_tools": list(s.allowed_tools)} if s.allowed_tools else {}),
                        **({"unavailable": str(lacking[s.name])} if s.name in lacking else {}),
                    }
                    for s in page
                ],
            }
            return ToolOutput(content=json.dumps(result, ensure_ascii=False))

        @tool(read_only=True)
        def skills_read(
            name: str,
            path: str = SKILL_FILE,
            offset: Annotated[int, Field(ge=0)] = 0,
            limit: Annotated[int, Field(ge=1, le=100_000)] = 20_000,
        ) -> ToolOutput:
            """Read a skill's instructions, or a file of its package, a page at a time.

            Args:
                name: The skill's name, as skills_list gives it.
                path: A file relative to the skill's folder; SKILL.md is its instructions.
                offset: Character to start from.
                limit: Characters to return.
            """
            try:
                page = catalog.read_resource(name, path, offset=offset, limit=limit)
            except (SkillNotFound, SkillPathError, ValueError) as exc:
                return ToolOutput(content=str(exc), is_error=True)
            if page.next_offset is None and page.offset == 0:
                return ToolOutput(content=page.text)
            end = page.offset + len(page.text)
            more = (
                f"call skills_read with offset={page.next_offset} for more"
                if page.next_offset is not None
                else "end of file"
            )
            note = f"\n\n[{path}: characters {page.offset}-{end} of {page.total}; {more}]"
            return ToolOutput(content=page.text + note)

        return [skills_list, skills_read]
