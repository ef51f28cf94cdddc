"""Pipeline workspaces (:class:`PipelineWorkspace`): a folder of markdown contracts, in stages.

```
blog-pipeline/
├── AGENT.md                      layer 0: identity and map
├── CONTEXT.md                    layer 1: routing
├── _config/  references/         layer 3: reference files
└── stages/
    ├── 01_research/CONTEXT.md    layer 2: the stage contract
    ├── 01_research/output/       layer 4: working files for later stages
    └── 02_draft/CONTEXT.md
```

A stage contract has ``## Inputs``, ``## Process`` and ``## Outputs``
sections and an optional ``## Tools`` section. Both ways of writing them load:

```markdown
## Inputs
- Layer 4 (working): ../01_research/output/research-output.md — the notes
- Layer 3 (reference): ../../_config/voice.md (the house voice)
- `references/topic.md` — workspace-relative, in backticks

## Outputs
- draft.md -> output/
- `summary.md` — a one-paragraph summary

## Tools
- mcp__search__*
```

A ``Layer N (tag):`` item names a path relative to the stage folder (a
folder ending in ``/`` stands for every artifact the stage owning that
``output/`` declares); a backticked or bare item names a workspace-relative
path. The note follows after a dash or in parentheses. Layer 3 is a file
under ``_config/`` or ``references/`` (of the workspace or of the stage),
layer 4 an earlier stage's ``output/``; a tag that disagrees with where the
file lives is an error. Outputs are plain file names written to the stage's
``output/``. Tools are name patterns (trailing ``*`` wildcards).

Contracts are parsed with markdown-it-py in time linear in their size, and
read, like every file a pipeline touches, through the workspace's directory
handle without following symlinks (:mod:`mainspring.pipelines._files`);
every error is a :class:`PipelineError` naming the file and line.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mainspring.pipelines._files import (
    DEFAULT_MAX_INPUT_BYTES,
    PipelineError,
    WorkspaceFiles,
    decode,
)

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "REFERENCE_DIRS",
    "InputRef",
    "OutputRef",
    "PipelineError",
    "PipelineWorkspace",
    "Stage",
    "load_workspace",
    "parse_contract",
]

REFERENCE_DIRS = ("_config", "references")
"""Folders holding layer-3 reference files (at the top, or inside a stage folder)."""

_REQUIRED = ("Inputs", "Process", "Outputs")
_LAYER_ITEM = re.compile(r"Layer[ \t]*(\d{1,3})[ \t]*(?:\(([^()\n]{0,80})\))?[ \t]*:[ \t]*", re.I)
_ARROW = re.compile(r"(\S+)[ \t]*(?:->|→)[ \t]*(\S+)")
_STAGE_NAME = re.compile(r"(\d{1,4})_([A-Za-z0-9][A-Za-z0-9_-]{0,63})")
_TOOL_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}\*?|\*")
_NOTE_LEAD = "\u2014\u2013-:"
_MARKDOWN = MarkdownIt("commonmark").disable("inline")
"""Block structure only: items and headings are read from each inline token's raw
``content``, so the inline pass (emphasis, links, code spans) would be wasted work."""


@dataclass(frozen=True, slots=True)
class InputRef:
    """One file a stage reads: a workspace-relative path, its layer and note."""

    path: str
    layer: Literal[3, 4]
    note: str = ""
    line: int = 0
    """Line of the list item in the contract."""


@dataclass(frozen=True, slots=True)
class OutputRef:
    """One artifact a stage writes to its ``output/`` folder."""

    name: str
    note: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """One parsed stage contract."""

    number: int
    verb: str
    directory: Path
    inputs: tuple[InputRef, ...]
    process: str
    outputs: tuple[OutputRef, ...]
    tools: tuple[str, ...] = ()
    """Allowed tool-name patterns; empty when the contract has no ``## Tools``."""
    outputs_line: int = 0

    @property
    def name(self) -> str:
        """The folder name, such as ``01_research``."""
        return self.directory.name

    @property
    def rel(self) -> str:
        """The stage folder, workspace-relative: ``stages/01_research``."""
        return f"stages/{self.name}"

    @property
    def contract(self) -> Path:
        """The stage's ``CONTEXT.md``."""
        return self.directory / "CONTEXT.md"

    @property
    def contract_rel(self) -> str:
        """The stage's ``CONTEXT.md``, workspace-relative."""
        return f"{self.rel}/CONTEXT.md"

    @property
    def output_dir(self) -> Path:
        """Where the stage's artifacts go."""
        return self.directory / "output"

    def artifact_rel(self, name: str) -> str:
        """The workspace-relative path of one artifact."""
        return f"{self.rel}/output/{name}"

    def artifact_paths(self) -> tuple[Path, ...]:
        """The files this stage promises to write."""
        return tuple(self.output_dir / o.name for o in self.outputs)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineWorkspace:
    """A loaded workspace: layers 0 and 1, and its stages in numeric order."""

    root: Path
    agent_md: str
    context_md: str
    stages: tuple[Stage, ...]
    files: WorkspaceFiles = field(repr=False, compare=False)
    """The only door to the workspace's files (directory handles, no-follow, capped)."""

    def stage(self, number: int) -> Stage:
        """The stage with this number."""
        for s in self.stages:
            if s.number == number:
                return s
        raise PipelineError(f"no stage numbered {number:02d}", path=self.root / "stages")


# -- markdown ------------------------------------------------------------------


def _sections(tokens: Sequence[Token]) -> dict[str, tuple[int, list[Token]]]:
    """``## Heading`` -> (1-based heading line, the tokens up to the next heading)."""
    found: dict[str, tuple[int, list[Token]]] = {}
    current: list[Token] | None = None
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            current = None
            if tok.tag == "h2" and i + 1 < len(tokens):
                title = tokens[i + 1].content.strip()
                line = tok.map[0] + 1 if tok.map else 0
                current = []
                found.setdefault(title, (line, current))
        elif current is not None:
            current.append(tok)
    return found


def _items(tokens: Sequence[Token]) -> list[tuple[str, int]]:
    """Top-level list items of a section as (raw first-line text, 1-based line).

    One pass: each item's text is the first ``inline`` token after its
    ``list_item_open``, found by walking forward, never by slicing.
    """
    items: list[tuple[str, int]] = []
    depth = 0
    waiting: int | None = None  # line of an item whose text is still to come
    for tok in tokens:
        if tok.type == "list_item_open":
            depth += 1
            if depth == 1:
                waiting = tok.map[0] + 1 if tok.map else 0
        elif tok.type == "list_item_close":
            depth -= 1
        elif tok.type == "inline" and waiting is not None:
            items.append((tok.content.split("\n", 1)[0].strip(), waiting))
            waiting = None
    if waiting is not None:
        items.append(("", waiting))
    return items


def _split_key(text: str) -> tuple[str, str]:
    """(a backticked or first-word key, the rest)."""
    if text.startswith("`"):
        end = text.find("`", 1)
        if end > 0:
            return text[1:end].strip(), text[end + 1 :]
    key, _, rest = text.partition(" ")
    return key.rstrip(":,"), rest


def _note(rest: str) -> str:
    note = rest.strip().lstrip(_NOTE_LEAD).strip()
    if note.startswith("(") and note.endswith(")"):
        note = note[1:-1].strip()
    return note


def _process_text(source: list[str], tokens: Sequence[Token]) -> str:
    lines = [t.map for t in tokens if t.map is not None and t.level == 0]
    if not lines:
        return ""
    start, end = lines[0][0], max(m[1] for m in lines)
    return "\n".join(source[start:end]).strip()


# -- paths -----------------------------------------------------------------------


def _clean_path(raw: str, base: str, contract: Path, line: int) -> tuple[str, bool]:
    """``raw`` joined to ``base`` and normalized lexically: (workspace-relative, is a folder)."""
    if not raw:
        raise PipelineError("input item names no path", path=contract, line=line)
    if not raw.isprintable() or "\\" in raw:
        raise PipelineError(
            f"input {raw!r} has characters a path may not", path=contract, line=line
        )
    if raw.startswith("/") or raw.startswith("~"):
        raise PipelineError(f"input {raw!r} escapes the workspace", path=contract, line=line)
    folder = raw.endswith("/")
    joined = posixpath.normpath(posixpath.join(base, raw)) if base else posixpath.normpath(raw)
    if joined == ".." or joined.startswith("../") or joined == ".":
        raise PipelineError(f"input {raw!r} escapes the workspace", path=contract, line=line)
    return joined, folder


def _layer(rel: str, folder: bool) -> Literal[3, 4] | None:
    parts = rel.split("/")
    if parts[0] in REFERENCE_DIRS and not folder and len(parts) >= 2:
        return 3
    if len(parts) >= 4 and parts[0] == "stages" and parts[2] in REFERENCE_DIRS and not folder:
        return 3
    if parts[0] == "stages" and len(parts) >= 3 and parts[2] == "output":
        if (folder and len(parts) == 3) or (not folder and len(parts) >= 4):
            return 4
    return None


@dataclass(frozen=True, slots=True)
class _RawInput:
    path: str
    folder: bool
    layer: Literal[3, 4]
    note: str
    line: int


def _input(
    text: str,
    line: int,
    *,
    stage_rel: str,
    contract: Path,
    files: WorkspaceFiles,
    checked: set[str],
) -> _RawInput:
    """One ``## Inputs`` item; a layer-3 file is checked once per contract (``checked``)."""
    tagged = _LAYER_ITEM.match(text)
    if tagged is not None:
        key, rest = _split_key(text[tagged.end() :])
        rel, folder = _clean_path(key, stage_rel, contract, line)
    else:
        key, rest = _split_key(text)
        rel, folder = _clean_path(key, "", contract, line)
    layer = _layer(rel, folder)
    if layer is None:
        raise PipelineError(
            f"input {key!r} must be a file under {', '.join(d + '/' for d in REFERENCE_DIRS)} "
            "or an earlier stage's output/",
            path=contract,
            line=line,
        )
    if tagged is not None and int(tagged.group(1)) != layer:
        where = "an earlier stage's output/" if layer == 4 else "a reference folder"
        raise PipelineError(
            f"input {key!r} is tagged Layer {tagged.group(1)} but lives in {where} (layer {layer})",
            path=contract,
            line=line,
        )
    if layer == 3 and rel not in checked:
        try:
            found = files.read_bytes(rel)
        except PipelineError as exc:
            raise PipelineError(f"input {key!r}: {_bare(exc)}", path=contract, line=line) from None
        if found is None:
            raise PipelineError(f"input file {key!r} does not exist", path=contract, line=line)
        checked.add(rel)  # (read once: listed on every line, it would cost a read per line)
    return _RawInput(rel, folder, layer, _note(rest), line)


def _bare(exc: PipelineError) -> str:
    return str(exc).removeprefix(f"{exc.path}: ")


def _output(text: str, line: int, contract: Path) -> OutputRef:
    arrow = None if text.startswith("`") else _ARROW.match(text)
    if arrow is not None:
        key, target, rest = arrow.group(1), arrow.group(2), text[arrow.end() :]
        if target.rstrip("/") not in ("output", "./output"):
            raise PipelineError(
                f"output {key!r} goes to {target!r}; artifacts go to output/",
                path=contract,
                line=line,
            )
    else:
        key, rest = _split_key(text)
    if (
        not key
        or posixpath.basename(key) != key
        or key in {".", ".."}
        or key.startswith(".")
        or not key.isprintable()
        or "\\" in key
    ):
        raise PipelineError(f"output {key!r} must be a plain file name", path=contract, line=line)
    return OutputRef(key, _note(rest), line)


# -- contracts -------------------------------------------------------------------


def parse_contract(
    root: Path,
    directory: Path,
    number: int,
    verb: str,
    *,
    files: WorkspaceFiles | None = None,
) -> Stage:
    """Parse ``directory/CONTEXT.md`` as a stage contract of the workspace at ``root``.

    Checks the required sections, that every input stays inside the
    workspace under a layer-3 folder or a stage's ``output/`` (and that a
    layer-3 file exists), and that each layer tag matches. A folder input
    (``../01_research/output/``) is expanded by :func:`load_workspace`.
    """
    files = files or WorkspaceFiles(root)
    stage, _ = _parse(files, directory, number, verb)
    return stage


def _parse(
    files: WorkspaceFiles, directory: Path, number: int, verb: str
) -> tuple[Stage, list[_RawInput]]:
    stage_rel = f"stages/{directory.name}"
    path = directory / "CONTEXT.md"
    text = files.read_bytes(f"{stage_rel}/CONTEXT.md")
    if text is None:
        raise PipelineError("stage folder has no CONTEXT.md", path=directory)
    source = decode(text, path)
    tokens = _MARKDOWN.parse(source)
    sections = _sections(tokens)
    for name in _REQUIRED:
        if name not in sections:
            raise PipelineError(f"missing section '## {name}'", path=path, line=1)

    checked: set[str] = set()
    raw_inputs = [
        _input(item, line, stage_rel=stage_rel, contract=path, files=files, checked=checked)
        for item, line in _items(sections["Inputs"][1])
    ]
    out_line, out_tokens = sections["Outputs"]
    outputs: list[OutputRef] = []
    seen: set[str] = set()
    for item, line in _items(out_tokens):
        ref = _output(item, line, path)
        if ref.name in seen:
            raise PipelineError(f"output {ref.name!r} is listed twice", path=path, line=line)
        seen.add(ref.name)
        outputs.append(ref)
    if not outputs:
        raise PipelineError("'## Outputs' names no artifact", path=path, line=out_line)
    tools: list[str] = []
    for item, line in _items(sections.get("Tools", (0, []))[1]):
        key, _ = _split_key(item)
        if not key:
            continue
        if _TOOL_PATTERN.fullmatch(key) is None:
            raise PipelineError(
                f"tool pattern {key!r} may hold letters, digits, '_', '-', '.' and a trailing '*'",
                path=path,
                line=line,
            )
        tools.append(key)
    stage = Stage(
        number=number,
        verb=verb,
        directory=directory,
        inputs=tuple(InputRef(r.path, r.layer, r.note, r.line) for r in raw_inputs if not r.folder),
        process=_process_text(source.splitlines(), sections["Process"][1]),
        outputs=tuple(outputs),
        tools=tuple(tools),
        outputs_line=out_line,
    )
    return stage, raw_inputs


# -- the workspace -------------------------------------------------------------


def _stage_folder(name: str, stages_dir: Path) -> tuple[int, str] | None:
    if name.startswith((".", "_")):
        return None  # hidden, or a helper folder by the underscore convention
    match = _STAGE_NAME.fullmatch(name) if name.isascii() else None
    if match is None:
        raise PipelineError(
            f"stage folder {name!r} is not named NN_verb (digits, '_', then letters, "
            "digits, '-' or '_')",
            path=stages_dir / name,
        )
    return int(match.group(1)), match.group(2)


def load_workspace(
    root: str | Path, *, max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> PipelineWorkspace:
    """Load and check a workspace folder; raises :class:`PipelineError` when malformed.

    ``AGENT.md``, ``CONTEXT.md`` and every contract are read through the
    workspace's directory handle: a symlink anywhere on the way is refused,
    as is a file over ``max_input_bytes`` or one that is not UTF-8.
    """
    root = Path(root)
    files = WorkspaceFiles(root, max_bytes=max_input_bytes)
    layers: dict[str, str] = {}
    for name in ("AGENT.md", "CONTEXT.md"):
        data = files.read_bytes(name)
        if data is None:
            raise PipelineError(f"workspace has no {name}", path=root)
        layers[name] = decode(data, root / name)
    names = files.list_dirs("stages")
    if names is None:
        raise PipelineError("workspace has no stages/ folder", path=root)
    stages_dir = root / "stages"
    parsed: dict[int, tuple[Stage, list[_RawInput]]] = {}
    for name in names:
        found = _stage_folder(name, stages_dir)
        if found is None:
            continue
        number, verb = found
        if number in parsed:
            raise PipelineError(
                f"two stages numbered {number:02d}: {parsed[number][0].name} and {name}",
                path=stages_dir / name / "CONTEXT.md",
                line=1,
            )
        parsed[number] = _parse(files, stages_dir / name, number, verb)
    if not parsed:
        raise PipelineError("workspace has no stages (stages/NN_verb/)", path=stages_dir)
    ordered = _check_working_inputs([parsed[n] for n in sorted(parsed)])
    return PipelineWorkspace(
        root=root,
        agent_md=layers["AGENT.md"],
        context_md=layers["CONTEXT.md"],
        stages=ordered,
        files=files,
    )


def _check_working_inputs(stages: Sequence[tuple[Stage, list[_RawInput]]]) -> tuple[Stage, ...]:
    """A layer-4 input must be an artifact an earlier stage declares; folders expand."""
    promised: dict[str, int] = {}
    owners: dict[str, Stage] = {}
    out: list[Stage] = []
    for stage, raw in stages:
        inputs: list[InputRef] = []
        listed: set[str] = set()  # an input listed twice (or by file and folder) is read once
        expanded: set[str] = set()
        for ref in raw:
            if ref.folder:
                owner = owners.get(ref.path)
                if owner is None:
                    raise PipelineError(
                        f"input folder {ref.path + '/'!r} is no earlier stage's output/",
                        path=stage.contract,
                        line=ref.line,
                    )
                if ref.path in expanded:
                    continue  # (expanding it again would cost its outputs once per line)
                expanded.add(ref.path)
                for o in owner.outputs:
                    rel = owner.artifact_rel(o.name)
                    if rel not in listed:
                        listed.add(rel)
                        inputs.append(InputRef(rel, 4, ref.note, ref.line))
                continue
            if ref.layer == 4 and promised.get(ref.path, stage.number) >= stage.number:
                raise PipelineError(
                    f"input file {ref.path!r} does not exist and no earlier stage writes it",
                    path=stage.contract,
                    line=ref.line,
                )
            if ref.path not in listed:
                listed.add(ref.path)
                inputs.append(InputRef(ref.path, ref.layer, ref.note, ref.line))
        for o in stage.outputs:
            promised[stage.artifact_rel(o.name)] = stage.number
        owners[f"{stage.rel}/output"] = stage
        out.append(replace(stage, inputs=tuple(inputs)))
    return tuple(out)
