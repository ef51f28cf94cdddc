"""Searching a workspace: files by glob, lines by pattern, every bound enforced.

:func:`search_files` walks below a directory without following links and
stops at the first bound it meets: results, files opened, bytes scanned,
output size and seconds. Patterns and globs are hostile input
(:mod:`mainspring.toolkits.patterns`): with RE2 the search runs in this
process (the tool's worker thread), in time linear in what it reads, and
checks its deadline between files. Without RE2, Python's ``re`` runs in a
child process (:func:`child_main`) that is killed at
the deadline: a backtracking pattern costs that child, never the caller's
thread, its GIL or its event loop, and the search is an error naming the
deadline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from mainspring.toolkits.confine import FileWorkspace, Location, WorkspaceError
from mainspring.toolkits.patterns import (
    Engine,
    LinePattern,
    PathGlob,
    compile_glob,
    compile_pattern,
    engine,
)

__all__ = ["MAX_OUTPUT_CHARS", "Bounds", "scan", "search_files"]

MAX_OUTPUT_CHARS = 40_000
"""What one read, listing or search returns at most (below the default result budget)."""
DEFAULT_MAX_SECONDS = 30.0
"""How long one search may run before it stops (RE2) or its child is killed (``re``)."""


@dataclass(slots=True, kw_only=True)
class Bounds:
    """What one search may still use; each walk step spends from it."""

    results: int = 200
    files: int = 20_000
    """Files opened to read."""
    bytes: int = 256 * 1024 * 1024
    """Bytes read."""
    deadline: float = float("inf")
    """A ``time.monotonic()`` instant; the walk stops at the first file past it."""

    def spent(self) -> str:
        """Why the search must stop now, or ``""``."""
        if self.results <= 0 or self.files <= 0 or self.bytes <= 0:
            return "stopped at a search bound; narrow the glob, path or pattern"
        if time.monotonic() > self.deadline:
            return "stopped at the search's time limit; narrow the glob, path or pattern"
        return ""


def _walk(
    ws: FileWorkspace, fd: int, location: Location, prefix: str, hidden: bool, depth: int
) -> Iterator[tuple[int, Location, str]]:
    """Regular files below the directory ``fd`` as (parent fd, location, relative path)."""
    with os.scandir(fd) as it:
        entries = sorted(
            (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
            for e in it
            if hidden or not e.name.startswith(".")
        )
    for name, is_dir, is_file in entries:
        rel = prefix + name
        if is_dir:
            if depth <= 0:
                continue
            try:  # no-follow: a directory swapped for a link since the listing is refused here
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            try:
                yield from _walk(ws, sub, ws.child(location, name), rel + "/", hidden, depth - 1)
            finally:
                os.close(sub)
        elif is_file:
            yield fd, ws.child(location, name), rel


@dataclass(frozen=True, slots=True, kw_only=True)
class _Query:
    """One search's arguments (what the child process is sent, as JSON)."""

    pattern: str | None
    glob: str
    path: str
    ignore_case: bool
    include_hidden: bool
    max_results: int
    max_files: int
    max_bytes: int
    max_seconds: float


def search_files(
    ws: FileWorkspace,
    *,
    pattern: str | None = None,
    glob: str = "*",
    path: str = ".",
    ignore_case: bool = False,
    include_hidden: bool = False,
    max_results: int = 200,
    max_files: int = 20_000,
    max_bytes: int = 256 * 1024 * 1024,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    using: Engine | None = None,
) -> str:
    """Files matching ``glob`` below ``path``; with ``pattern``, the lines matching it.

    Bounded by results, files opened, bytes scanned, output size and
    ``max_seconds``; files over the workspace's size limit, binary files and
    refused files are skipped. With RE2 (``using="re2"``, the default when
    installed) the search runs here and one past its time stops with what it
    found; with Python's ``re`` (``using="re"``, the default without RE2; say
    so for backreferences or lookaround) it runs in a child process, and one
    past its time is killed.

    Raises:
        WorkspaceError: a bad path, a pattern or glob too long or invalid, or
            (``re`` only) the search killed at ``max_seconds``.
        ImportError: ``using="re2"`` without ``google-re2`` installed.
    """
    query = _Query(
        pattern=pattern,
        glob=glob,
        path=path,
        ignore_case=ignore_case,
        include_hidden=include_hidden,
        max_results=max_results,
        max_files=max_files,
        max_bytes=max_bytes,
        max_seconds=max_seconds,
    )
    using = engine() if using is None else using
    if using == "re":
        return _in_child(ws, query)
    if engine() != "re2":
        raise ImportError('search_files(using="re2") needs: pip install "mainspring[re2]"')
    return _search(ws, query, using="re2")


def _search(ws: FileWorkspace, query: _Query, *, using: Engine) -> str:
    regex = None
    if query.pattern:
        regex = compile_pattern(query.pattern, ignore_case=query.ignore_case, using=using)
    names = compile_glob(query.glob, using=using)
    bounds = Bounds(
        results=query.max_results,
        files=query.max_files,
        bytes=query.max_bytes,
        deadline=time.monotonic() + query.max_seconds,
    )
    return scan(
        ws, regex=regex, names=names, path=query.path, hidden=query.include_hidden, bounds=bounds
    )


def scan(
    ws: FileWorkspace,
    *,
    regex: LinePattern | None,
    names: PathGlob,
    path: str = ".",
    hidden: bool = False,
    bounds: Bounds,
) -> str:
    """The search itself, with compiled matchers (of either engine) and its bounds.

    Run it only with RE2's matchers, or where a deadline can kill it: Python's
    ``re`` holds the GIL for as long as one match backtracks.
    """
    location = ws.locate(path)
    out: list[str] = []
    skipped = 0
    size = 0
    cut = ""
    with ws.open_dir(location) as root_fd:
        for dir_fd, loc, rel in _walk(ws, root_fd, location, "", hidden, 64):
            if not names.matches(rel):
                continue
            if regex is None:
                hits = [loc.display]
                bounds.results -= 1
            else:
                try:
                    found = ws.read_in(dir_fd, loc)
                except WorkspaceError:
                    skipped += 1
                    continue
                bounds.files -= 1
                if found is None or b"\x00" in found.data[:8192]:
                    continue
                bounds.bytes -= len(found.data)
                hits = _grep(regex, found.data, loc.display, bounds)
            out.extend(hits)
            size += sum(len(h) + 1 for h in hits)
            cut = bounds.spent()
            if cut:
                break
            if size > MAX_OUTPUT_CHARS:
                cut = "output cut; narrow the search"
                break
    text = "\n".join(out)
    notes = [f"{len(out)} {'files' if regex is None else 'matches'}"]
    if skipped:
        notes.append(f"{skipped} files refused (too large, links or special)")
    if cut:
        notes.append(cut)
    return (text + "\n" if text else "") + "(" + "; ".join(notes) + ")"


def _grep(regex: LinePattern, data: bytes, display: str, bounds: Bounds) -> list[str]:
    hits: list[str] = []
    for line_no, text in regex.lines(data):
        line = text.rstrip("\r")
        if len(line) > 300:
            line = line[:300] + "…"
        hits.append(f"{display}:{line_no}: {line}")
        bounds.results -= 1
        if bounds.results <= 0:
            break
    return hits


# ------------------------------------------------------ the child (no RE2)


def _in_child(ws: FileWorkspace, query: _Query) -> str:
    """Run the search with Python's ``re`` in a child process killed at the deadline."""
    request = {
        "roots": [str(root) for root in ws.roots],
        "max_file_bytes": ws.max_file_bytes,
        "query": asdict(query),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-P", "-c", _CHILD],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=query.max_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:  # (run kills the child before raising)
        raise WorkspaceError(
            f"the search ran past its {query.max_seconds:g}s limit and was stopped (Python's "
            "re backtracks on some patterns; install google-re2 for linear-time search): "
            "narrow the pattern, glob or path",
            path=query.path,
        ) from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        reason = done.stderr.strip()[-500:] or f"exit {done.returncode}"
        raise WorkspaceError(f"the search failed: {reason}", path=query.path) from None
    if "error" in answer:
        raise WorkspaceError(str(answer["error"]), path=query.path)
    return str(answer["text"])


_CHILD = "from mainspring.toolkits.search import child_main; child_main()"
"""The child's program (``-P``: nothing from the working directory is imported)."""


def child_main() -> None:  # pragma: no cover - runs in the child process
    """The child of a search without RE2: a request on stdin, the answer on stdout."""
    request = json.loads(sys.stdin.read())
    ws = FileWorkspace(request["roots"], max_file_bytes=request["max_file_bytes"])
    try:
        text = _search(ws, _Query(**request["query"]), using="re")
    except WorkspaceError as exc:
        answer = {"error": str(exc)}
    else:
        answer = {"text": text}
    sys.stdout.write(json.dumps(answer))
