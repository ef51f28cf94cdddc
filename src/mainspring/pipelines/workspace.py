"""Workspace: a folder of markdown contracts, parsed into numbered stages.

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
sections and an optional ``## Tools`` section. Inputs and outputs are list
items: a path or name (in backticks, or the first word), then a note.
Inputs live under ``_config/`` or ``references/`` (layer 3) or in an
earlier stage's ``output/`` (layer 4). Outputs are file names written to the
stage's ``output/``. Tools are name patterns (trailing ``*`` wildcards).

Contracts are parsed with markdown-it-py; every error is a
:class:`PipelineError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mainspring.errors import ConfigError

__all__ = [
    "REFERENCE_DIRS",
    "InputRef",
    "OutputRef",
    "PipelineError",
    "Stage",
    "Workspace",
    "load_workspace",
    "parse_contract",
    "read_text",
]

REFERENCE_DIRS = ("_config", "references")
"""Top-level folders holding layer-3 reference files."""

_REQUIRED = ("Inputs", "Process", "Outputs")


class PipelineError(ConfigError):
    """A workspace or stage contract is malformed, or a stage cannot run.

    Attributes:
        path: The file at fault (a contract, or the workspace folder).
        line: 1-based line in ``path``, when one is to blame.
    """

    def __init__(self, message: str, *, path: Path, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


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
    def contract(self) -> Path:
        """The stage's ``CONTEXT.md``."""
        return self.directory / "CONTEXT.md"

    @property
    def output_dir(self) -> Path:
        """Where the stage's artifacts go."""
        return self.directory / "output"

    def artifact_paths(self) -> tuple[Path, ...]:
        """The files this stage promises to write."""
        return tuple(self.output_dir / o.name for o in self.outputs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    """A loaded workspace: layers 0 and 1, and its stages in numeric order."""

    root: Path
    agent_md: str
    context_md: str
    stages: tuple[Stage, ...]

    def stage(self, number: int) -> Stage:
        """The stage with this number."""
        for s in self.stages:
            if s.number == number:
                return s
        raise PipelineError(f"no stage numbered {number:02d}", path=self.root / "stages")


def _sections(tokens: Sequence[Token]) -> dict[str, tuple[int, list[Token]]]:
    """``## Heading`` -> (1-based heading line, the tokens up to the next heading)."""
    found: dict[str, tuple[int, list[Token]]] = {}
    current: list[Token] | None = None
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            current = None
            if tok.tag == "h2":
                title = tokens[i + 1].content.strip()
                line = tok.map[0] + 1 if tok.map else 0
                current = []
                found.setdefault(title, (line, current))
        elif current is not None:
            current.append(tok)
    return found


def _items(tokens: Sequence[Token]) -> list[tuple[str, str, int]]:
    """List items of a section as (key, note, 1-based line)."""
    items: list[tuple[str, str, int]] = []
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == "list_item_open":
            depth += 1
            if depth == 1:
                inline = next((t for t in tokens[i + 1 :] if t.type == "inline"), None)
                if inline is not None:
                    line = tok.map[0] + 1 if tok.map else 0
                    items.append((*_key_and_note(inline), line))
        elif tok.type == "list_item_close":
            depth -= 1
    return items


def _key_and_note(inline: Token) -> tuple[str, str]:
    children = inline.children or []
    if children and children[0].type == "code_inline":
        key = children[0].content.strip()
        rest = "".join(c.content for c in children[1:])
    else:
        key, _, rest = inline.content.strip().partition(" ")
        key = key.rstrip(":,")
    return key, rest.strip().lstrip("\u2014\u2013-:").strip()


def _layer(rel: str) -> Literal[3, 4] | None:
    parts = Path(rel).parts
    if parts and parts[0] in REFERENCE_DIRS:
        return 3
    if len(parts) >= 4 and parts[0] == "stages" and parts[2] == "output":
        return 4
    return None


def _process_text(source: list[str], tokens: Sequence[Token]) -> str:
    lines = [t.map for t in tokens if t.map is not None and t.level == 0]
    if not lines:
        return ""
    start, end = lines[0][0], max(m[1] for m in lines)
    return "\n".join(source[start:end]).strip()


def read_text(path: Path) -> str:
    """A workspace file's text; a file that is not UTF-8 is a :class:`PipelineError`."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"{path.name} is not UTF-8 text (byte {exc.start}: {exc.reason})", path=path
        ) from None
    except OSError as exc:
        raise PipelineError(f"cannot read {path.name}: {exc.strerror or exc}", path=path) from None


def parse_contract(root: Path, directory: Path, number: int, verb: str) -> Stage:
    """Parse ``directory/CONTEXT.md`` as a stage contract of the workspace at ``root``.

    Checks the required sections and that every input stays inside the
    workspace, under a layer-3 folder or a stage's ``output/``, and (for
    layer 3) exists.
    """
    path = directory / "CONTEXT.md"
    if not path.is_file():
        raise PipelineError("stage folder has no CONTEXT.md", path=directory)
    text = read_text(path)
    tokens = MarkdownIt("commonmark").parse(text)
    sections = _sections(tokens)
    for name in _REQUIRED:
        if name not in sections:
            raise PipelineError(f"missing section '## {name}'", path=path, line=1)

    inputs: list[InputRef] = []
    for key, note, line in _items(sections["Inputs"][1]):
        inputs.append(_input(root, path, key, note, line))
    outputs: list[OutputRef] = []
    out_line, out_tokens = sections["Outputs"]
    for key, note, line in _items(out_tokens):
        if not key or Path(key).name != key or key in {".", ".."}:
            raise PipelineError(f"output {key!r} must be a plain file name", path=path, line=line)
        outputs.append(OutputRef(key, note, line))
    if not outputs:
        raise PipelineError("'## Outputs' names no artifact", path=path, line=out_line)
    tools = tuple(key for key, _, _ in _items(sections.get("Tools", (0, []))[1]) if key)
    return Stage(
        number=number,
        verb=verb,
        directory=directory,
        inputs=tuple(inputs),
        process=_process_text(text.splitlines(), sections["Process"][1]),
        outputs=tuple(outputs),
        tools=tools,
        outputs_line=out_line,
    )


def _input(root: Path, contract: Path, key: str, note: str, line: int) -> InputRef:
    if not key:
        raise PipelineError("input item names no path", path=contract, line=line)
    resolved = (root / key).resolve()
    if Path(key).is_absolute() or not resolved.is_relative_to(root.resolve()):
        raise PipelineError(f"input {key!r} escapes the workspace", path=contract, line=line)
    rel = resolved.relative_to(root.resolve()).as_posix()
    layer = _layer(rel)
    if layer is None:
        raise PipelineError(
            f"input {key!r} must be under {', '.join(d + '/' for d in REFERENCE_DIRS)} "
            "or an earlier stage's output/",
            path=contract,
            line=line,
        )
    if layer == 3 and not resolved.is_file():
        raise PipelineError(f"input file {key!r} does not exist", path=contract, line=line)
    return InputRef(rel, layer, note, line)


def _stage_folder(directory: Path) -> tuple[int, str] | None:
    number, sep, verb = directory.name.partition("_")
    if not sep or not number.isdigit() or not verb:
        return None
    return int(number), verb


def load_workspace(root: str | Path) -> Workspace:
    """Load and check a workspace folder; raises :class:`PipelineError` when malformed."""
    root = Path(root)
    for name in ("AGENT.md", "CONTEXT.md"):
        if not (root / name).is_file():
            raise PipelineError(f"workspace has no {name}", path=root)
    stages_dir = root / "stages"
    if not stages_dir.is_dir():
        raise PipelineError("workspace has no stages/ folder", path=root)
    stages: dict[int, Stage] = {}
    for directory in sorted(p for p in stages_dir.iterdir() if p.is_dir()):
        parsed = _stage_folder(directory)
        if parsed is None:
            continue
        number, verb = parsed
        if number in stages:
            raise PipelineError(
                f"two stages numbered {number:02d}: {stages[number].name} and {directory.name}",
                path=directory / "CONTEXT.md",
                line=1,
            )
        stages[number] = parse_contract(root, directory, number, verb)
    if not stages:
        raise PipelineError("workspace has no stages (stages/NN_verb/)", path=stages_dir)
    ordered = tuple(stages[n] for n in sorted(stages))
    _check_working_inputs(root, ordered)
    return Workspace(
        root=root,
        agent_md=read_text(root / "AGENT.md"),
        context_md=read_text(root / "CONTEXT.md"),
        stages=ordered,
    )


def _check_working_inputs(root: Path, stages: Sequence[Stage]) -> None:
    """A layer-4 input must be an artifact an earlier stage declares."""
    promised: dict[str, int] = {}
    base = root.resolve()
    for stage in stages:
        for ref in stage.inputs:
            if ref.layer == 4 and promised.get(ref.path, stage.number) >= stage.number:
                raise PipelineError(
                    f"input file {ref.path!r} does not exist and no earlier stage writes it",
                    path=stage.contract,
                    line=ref.line,
                )
        for artifact in stage.artifact_paths():
            promised[artifact.resolve().relative_to(base).as_posix()] = stage.number
