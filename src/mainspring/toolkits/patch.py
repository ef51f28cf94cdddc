"""``apply_patch``: a multi-file patch, checked whole before its first write.

Every operation is planned first — the originals read through the
:class:`FileWorkspace`, ``expected_versions`` compared, chunks applied in memory,
targets of adds and moves found missing — and only then written, each file
atomically, while holding the writer locks of every file it touches (taken in
one order, so two patches cannot deadlock). A file that changed between the
plan and the write stops the patch before anything is written.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread

from mainspring.toolkits.confine import FileData, FileWorkspace, Location, WorkspaceError
from mainspring.toolkits.files import Roots, workspace_of
from mainspring.toolkits.patch_format import (
    AddFile,
    DeleteFile,
    PatchError,
    PatchLimits,
    UpdateFile,
    apply_chunks,
    parse_patch,
)
from mainspring.toolkits.text import BinaryFile, Text, decode_text, diff_preview, encode_text
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag, Permission, ToolInput

__all__ = ["FileChange", "PatchPlan", "apply_patch_text", "patch_tools", "plan_patch"]

MISSING = "missing"
_NEW_FILE_MODE = 0o644


@dataclass(frozen=True, slots=True)
class FileChange:
    """What one operation does to one file (a move is one change with a ``target``)."""

    kind: Literal["add", "delete", "update", "move"]
    source: Location
    target: Location
    before: FileData | None
    before_text: Text | None
    after: bytes | None
    """The new bytes; ``None`` for a delete."""
    after_text: str
    summary: str

    @property
    def before_version(self) -> str:
        """SHA-256 of the original bytes, or ``"missing"``."""
        return MISSING if self.before is None else _sha(self.before.data)

    @property
    def after_version(self) -> str:
        """SHA-256 of the new bytes, or ``"missing"`` after a delete."""
        return MISSING if self.after is None else _sha(self.after)

    def preview(self) -> str:
        """The operation and a diff."""
        old = "" if self.before_text is None else self.before_text.content
        return self.summary + "\n" + diff_preview(old, self.after_text, path=self.target.display)


@dataclass(frozen=True, slots=True)
class PatchPlan:
    """Every change of a patch, checked and computed, nothing written yet."""

    changes: tuple[FileChange, ...]

    def report(self, *, applied: bool) -> str:
        """One line per operation, with the versions before and after."""
        head = "applied" if applied else "dry run: would apply"
        rows = [f"{head} {len(self.changes)} operation(s):"]
        rows.extend(
            f"{c.summary} [{c.before_version[:12]} -> {c.after_version[:12]}]" for c in self.changes
        )
        return "\n".join(rows)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(ws: FileWorkspace, location: Location) -> FileData | None:
    try:
        with ws.open_parent(location) as dir_fd:
            return ws.read_in(dir_fd, location)
    except WorkspaceError as exc:
        if "no such directory" in str(exc):
            return None
        raise


def _text(found: FileData, display: str) -> Text:
    try:
        return decode_text(found.data)
    except BinaryFile as exc:
        raise PatchError(f"{display}: {exc}", path=display) from None


def _lines(content: str) -> tuple[list[str], bool]:
    if not content:
        return [], True
    eol = content.endswith("\n")
    lines = content.split("\n")
    if eol:
        lines.pop()
    return lines, eol


def plan_patch(
    ws: FileWorkspace,
    patch: str,
    *,
    expected_versions: Mapping[str, str] | None = None,
    limits: PatchLimits = PatchLimits(),
) -> PatchPlan:
    """Parse and check a patch against the workspace; compute every new file.

    Raises:
        PatchError: the patch is malformed, a chunk does not match exactly one
            place, a target exists, a file is touched twice, or a version differs.
        WorkspaceError: a path is refused.
    """
    parsed = parse_patch(patch, limits)
    changes: list[FileChange] = []
    seen: dict[Location, str] = {}
    for op in parsed.operations:
        change = _plan_one(ws, op)
        for loc in {change.source, change.target}:
            if loc in seen:
                raise PatchError(f"{loc.display} is touched twice in one patch", path=loc.display)
            seen[loc] = loc.display
        changes.append(change)
    _check_versions(ws, changes, expected_versions or {})
    return PatchPlan(tuple(changes))


def _plan_one(ws: FileWorkspace, op: AddFile | DeleteFile | UpdateFile) -> FileChange:
    source = ws.locate(op.path)
    found = _read(ws, source)
    display = source.display
    if isinstance(op, AddFile):
        if found is not None:
            raise PatchError(f"{display} exists; Add File never overwrites", path=display)
        data = encode_text(op.content)
        return FileChange(
            "add", source, source, None, None, data, op.content, f"A {display} (+{len(op.lines)})"
        )
    if found is None:
        raise PatchError(f"{display}: no such file", path=display)
    text = _text(found, display)
    if isinstance(op, DeleteFile):
        return FileChange("delete", source, source, found, text, None, "", f"D {display}")
    lines, eol = _lines(text.content)
    new_lines = apply_chunks(lines, op.chunks, path=display)
    after = "\n".join(new_lines) + ("\n" if eol and new_lines else "")
    try:
        data = encode_text(after, text)
    except UnicodeEncodeError as exc:
        raise PatchError(f"{display}: cannot be stored as {text.encoding}: {exc.reason}") from None
    if len(data) > ws.max_file_bytes:
        raise PatchError(f"{display}: the result is over {ws.max_file_bytes} bytes", path=display)
    added = sum(len(c.new) for c in op.chunks) - sum(len(c.old) for c in op.chunks)
    summary = f"M {display} ({len(op.chunks)} chunk(s), {added:+d} lines)"
    if op.move_to is None:
        return FileChange("update", source, source, found, text, data, after, summary)
    target = ws.locate(op.move_to)
    if _read(ws, target) is not None:
        raise PatchError(f"{target.display} exists; Move to never overwrites", path=display)
    summary = f"R {display} -> {target.display} ({len(op.chunks)} chunk(s), {added:+d} lines)"
    return FileChange("move", source, target, found, text, data, after, summary)


def _check_versions(
    ws: FileWorkspace, changes: list[FileChange], expected: Mapping[str, str]
) -> None:
    versions: dict[Location, str] = {}
    for change in changes:
        versions[change.source] = change.before_version
        versions.setdefault(change.target, MISSING)
    for path, want in expected.items():
        loc = ws.locate(path)
        have = versions.get(loc)
        if have is None:
            found = _read(ws, loc)
            have = MISSING if found is None else _sha(found.data)
        if want.lower() != have:
            raise PatchError(
                f"{loc.display}: expected version {want[:12]}, found {have[:12]}", path=loc.display
            )


# ------------------------------------------------------------------ writing


def apply_patch_text(
    ws: FileWorkspace,
    patch: str,
    *,
    dry_run: bool = False,
    expected_versions: Mapping[str, str] | None = None,
    limits: PatchLimits = PatchLimits(),
) -> str:
    """Plan a patch, then (unless ``dry_run``) write it; the per-operation report."""
    plan = plan_patch(ws, patch, expected_versions=expected_versions, limits=limits)
    if dry_run:
        return plan.report(applied=False)
    _write(ws, plan)
    return plan.report(applied=True)


def _write(ws: FileWorkspace, plan: PatchPlan) -> None:
    touched = {c.source for c in plan.changes} | {c.target for c in plan.changes}
    with contextlib.ExitStack() as stack:
        fds: dict[Location, int] = {}
        for loc in sorted(touched, key=lambda loc: (loc.root, loc.parts)):
            creates = any(c.target == loc and c.kind in ("add", "move") for c in plan.changes)
            fds[loc] = stack.enter_context(ws.open_parent(loc, create=creates))
        for loc in sorted(fds, key=lambda loc: ws.lock_key(fds[loc], loc)):  # one global order
            stack.enter_context(ws.lock(fds[loc], loc))
        for change in plan.changes:  # everything is re-checked before the first write
            _recheck(ws, fds, change)
        for change in plan.changes:
            _write_one(ws, fds, change)


def _recheck(ws: FileWorkspace, fds: dict[Location, int], change: FileChange) -> None:
    now = ws.read_in(fds[change.source], change.source)
    now_version = MISSING if now is None else _sha(now.data)
    if now_version != change.before_version:
        raise PatchError(
            f"{change.source.display} changed since the patch was checked; nothing was written",
            path=change.source.display,
        )
    if change.target != change.source and ws.read_in(fds[change.target], change.target):
        raise PatchError(f"{change.target.display} appeared; nothing was written")


def _write_one(ws: FileWorkspace, fds: dict[Location, int], change: FileChange) -> None:
    if change.after is None:
        ws.unlink_in(fds[change.source], change.source)
        return
    mode = _NEW_FILE_MODE if change.before is None else change.before.mode
    ws.replace_in(fds[change.target], change.target, change.after, mode=mode)
    if change.kind == "move":
        ws.unlink_in(fds[change.source], change.source)


# -------------------------------------------------------------------- tools


def patch_tools(
    roots: Roots, *, permission: Permission = "confirm", limits: PatchLimits = PatchLimits()
) -> list[Tool]:
    """The ``apply_patch`` tool confined to ``roots``, confirm-tier (a dry run never asks).

    Its pending action carries every file's diff (the policy's ``preview``); a
    patch that would not apply fails its preflight check without anyone being asked.
    """
    ws = workspace_of(roots)

    def tier(args: ToolInput) -> Permission:
        return "auto" if args.get("dry_run") else permission

    async def preflight(args: ToolInput) -> str | None:
        try:
            await anyio.to_thread.run_sync(_plan_args, ws, args, limits)
        except (PatchError, WorkspaceError, OSError) as exc:
            return f"the patch was not applied: {exc}"
        return None

    def preview(args: ToolInput) -> str:
        plan = _plan_args(ws, args, limits)
        return "\n".join(c.preview() for c in plan.changes)

    @tool(
        name="apply_patch",
        permission=tier,
        flags={Flag.MUTATING},
        preflight=preflight,
        max_result_chars=20_000,
        preview=preview,
    )
    def apply_patch(
        patch: str, dry_run: bool = False, expected_versions: dict[str, str] | None = None
    ) -> str:
        """Apply a patch in the '*** Begin Patch' format (Add / Delete / Update File, Move to).

        Each chunk's context and removed lines must match exactly one place;
        the whole patch is checked before the first file is written.

        Args:
            patch: From '*** Begin Patch' to '*** End Patch'.
            dry_run: Check and report only; nothing is written.
            expected_versions: Path to the SHA-256 of the file it expects, or "missing".
        """
        return apply_patch_text(
            ws, patch, dry_run=dry_run, expected_versions=expected_versions, limits=limits
        )

    return [apply_patch]


def _plan_args(ws: FileWorkspace, args: ToolInput, limits: PatchLimits) -> PatchPlan:
    versions = args.get("expected_versions")
    expected = {str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {}
    return plan_patch(ws, str(args["patch"]), expected_versions=expected, limits=limits)
