"""The documentation site is code: its snippets run, its names import, its map is the code.

- Every ```python block of ``docs/**/*.md`` runs offline as a script of its own
  (a subprocess in a fresh temporary folder), and prints what its "It prints:"
  block says. A block that reads ``REDIS_URL`` or ``DATABASE_URL`` gets a real
  Redis or PostgreSQL (the store tests' servers, ``tests/stores/servers.py``).
- Every name a page mentions in backticks imports from one of the public
  modules (the README's rule, ``tests/test_readme.py``).
- ``mkdocs.yml``'s nav and ``docs/`` agree, both ways.
- ``docs/architecture.md``'s layout lists every package and module under
  ``src/mainspring`` and nothing that is not there.
- The README, the front page, stays under 10 KB.

``mkdocs build --strict`` itself is a step of ``.ci/run`` (``make docs``), not a
test: it needs the ``docs`` extra and takes half a minute.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import yaml

from tests.test_readme import PUBLIC_MODULES, mentioned_names, not_importable_by_design

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
SRC = ROOT / "src" / "mainspring"

# Modules a docs page may name its names from, besides the README's.
DOCS_MODULES = (
    *PUBLIC_MODULES,
    "mainspring.testing",
    "mainspring.tools",
    "mainspring.errors",
    "mainspring.events",
    "mainspring.messages",
    "mainspring.output",
    "mainspring.skill_runner",
    "mainspring.subagents",
    "mainspring.engine.remote",
    "mainspring.engine.signing",
    "mainspring.models.openai",
    "mainspring.models.retry",
    "mainspring.stores.redis",
    "mainspring.stores.postgres",
    "mainspring_finance",  # the finance example (examples/finance/), shipped in the wheel
)
# Names of other projects' protocols and SDKs that pages mention (not mainspring's).
FOREIGN_NAMES = {
    "RunAgentInput",  # AG-UI
    "DefaultChatTransport",  # the AI SDK
    "UIMessage",  # the AI SDK
    "TestModel",  # Pydantic AI
    "FunctionModel",  # Pydantic AI
    "RunContext",  # Pydantic AI
    "StateGraph",  # LangGraph
    "Runner",  # the OpenAI Agents SDK
}


@dataclass(frozen=True)
class Block:
    page: Path
    index: int
    code: str
    expected: str | None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}#{self.index}"


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text()
    found: list[Block] = []
    for index, match in enumerate(re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL)):
        after = text[match.end() :]
        printed = re.match(r"\s*It prints:\s*```text\n(.*?)```", after, flags=re.DOTALL)
        found.append(Block(page, index, match.group(1), printed.group(1) if printed else None))
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def test_the_docs_have_their_pages_and_examples() -> None:
    assert (DOCS / "index.md").exists() and (DOCS / "architecture.md").exists()
    assert len(BLOCKS) >= 15, "the docs lost their examples"
    assert sum(block.expected is not None for block in BLOCKS) >= 8, "say what examples print"


def test_the_block_finder_reads_the_printed_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        'Text.\n\n```python\nprint("a")\n```\n\nIt prints:\n\n```text\na\n```\n\n'
        "```python\nx = 1\n```\n"
    )
    first, second = blocks_of(page)
    assert (first.code, first.expected) == ('print("a")\n', "a\n")
    assert (second.code, second.expected) == ("x = 1\n", None)


def services_for(code: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """Real servers for the URLs a block reads from the environment."""
    env: dict[str, str] = {}
    if "REDIS_URL" in code:
        env["REDIS_URL"] = request.getfixturevalue("redis_server").url
    if "DATABASE_URL" in code:
        env["DATABASE_URL"] = request.getfixturevalue("postgres_schemas").url()
    return env


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_every_python_block_runs_offline(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {**os.environ, **services_for(block.code, request)}
    result = subprocess.run(
        [sys.executable, "-c", block.code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, f"{block.id} failed:\n{result.stderr}"
    assert result.stdout.strip(), f"{block.id}: an example should print what a reader learns"
    if block.expected is not None:
        assert result.stdout == block.expected, f"{block.id} printed something else"


def prose_of(page: Path) -> str:
    """A page's prose, less quoted CLI messages; on "coming from", less its tables' first column.

    That column names the other frameworks' APIs (``RunState``, ``InMemorySaver``…),
    which no mainspring module exports; the columns beside it name mainspring's.
    """
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    text = re.sub(r"`error: [^`]*`", "", text)  # a message the CLI prints, quoted whole
    if page.name != "coming-from.md":
        return text
    return "\n".join(
        " | ".join(line.split(" | ")[1:]) if line.startswith("| ") else line
        for line in text.splitlines()
    )


# architecture.md describes the implementation: its names are private on purpose.
USER_PAGES = [page for page in PAGES if page.name != "architecture.md"]


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(ROOT)) for p in USER_PAGES])
def test_every_name_a_page_mentions_is_importable(page: Path) -> None:
    from mainspring.server import ServerConfig

    modules = [importlib.import_module(m) for m in DOCS_MODULES]
    names = mentioned_names(prose_of(page)) - not_importable_by_design() - FOREIGN_NAMES
    names -= {f.name for f in fields(ServerConfig)}  # the server's settings, by field name
    missing = sorted(n for n in names if not any(hasattr(module, n) for module in modules))
    assert not missing, f"{page.name} names what no public module exports: {missing}"


LONGEST_PARAGRAPH = 1_200  # characters; the README once had one of 5,137


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs and list items (not code, tables or headings)."""
    found: list[str] = []
    for block in re.sub(r"```.*?```", "", text, flags=re.DOTALL).split("\n\n"):
        block = block.strip()
        if block and not re.match(r"^(\||#|<!--)", block):
            found.extend(re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", block))
    return found


def test_the_paragraph_finder_splits_lists() -> None:
    text = "One.\nTwo.\n\n- a\n  b\n- c\n\n| x |\n\n```python\ncode\n```\n"
    assert paragraphs(text) == ["One.\nTwo.", "- a\n  b", "- c"]


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(ROOT)) for p in USER_PAGES])
def test_no_wall_of_text(page: Path) -> None:
    longest = max(paragraphs(page.read_text()), key=len, default="")
    assert len(longest) <= LONGEST_PARAGRAPH, f"{page.name}: break up {longest[:80]!r}…"


def test_a_name_no_module_exports_is_caught() -> None:
    modules = [importlib.import_module(m) for m in DOCS_MODULES]
    names = mentioned_names("Use `SessionFactory` or `make_session(…)`, like `Session`.")
    assert names == {"SessionFactory", "make_session", "Session"}
    missing = {n for n in names if not any(hasattr(module, n) for module in modules)}
    assert missing == {"SessionFactory", "make_session"}


# ------------------------------------------------------------------ the site's map


def nav_pages(entries: object) -> list[str]:
    """Every page a nav (a nested list of strings and one-key mappings) names."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {entries!r}")


def test_every_nav_entry_exists_and_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["strict"] is True
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), "a page is in the nav twice"
    on_disk = {str(page.relative_to(DOCS)) for page in PAGES}
    assert sorted(set(listed) - on_disk) == [], "nav entries without a page"
    assert sorted(on_disk - set(listed)) == [], "pages missing from the nav"


def test_the_site_fetches_nothing_at_build_time() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["font"] is False, "theme fonts are fetched from a CDN"
    plugins = {next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]}
    assert "social" not in plugins, "social cards fetch fonts"


def test_every_api_reference_page_renders_a_public_module() -> None:
    rendered: set[str] = set()
    for page in sorted((DOCS / "reference").glob("*.md")):
        for target in re.findall(r"^::: ([\w.]+)$", page.read_text(), flags=re.MULTILINE):
            module = next((m for m in DOCS_MODULES if target.startswith(m)), None)
            assert module is not None, f"{page.name} renders {target}, not a public module"
            rendered.add(target)
    assert {"mainspring", "mainspring.models", "mainspring.stores", "mainspring.tools"} <= rendered


def test_links_between_pages_point_at_pages() -> None:
    for page in [ROOT / "README.md", *PAGES]:
        prose = prose_of(page)
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", prose):
            if "://" in target:
                continue
            assert (page.parent / target).resolve().exists(), f"{page.name} links to {target}"


# ------------------------------------------------------------------ the README


def test_the_readme_has_no_wall_of_text() -> None:
    longest = max(paragraphs((ROOT / "README.md").read_text()), key=len)
    assert len(longest) <= LONGEST_PARAGRAPH


def test_the_readme_is_a_front_page_under_10_kb() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size < 10_000, f"README.md is {size} bytes: move the detail into docs/"


def test_the_readme_links_into_the_docs() -> None:
    text = (ROOT / "README.md").read_text()
    for page in ("docs/quickstart.md", "docs/cli.md", "docs/concepts/sessions.md"):
        assert f"]({page})" in text, f"the README should link {page}"


# ------------------------------------------------------------------ architecture.md


def layout_block() -> str:
    text = (DOCS / "architecture.md").read_text()
    section = text.split("\n## Layout", 1)[1]
    found = re.search(r"```\n(.*?)```", section, flags=re.DOTALL)
    assert found, "docs/architecture.md lost its layout block"
    return found.group(1)


ENTRY = re.compile(r"^( *)((?:[\w]+/|[\w/]+\.py)(?:, (?:[\w]+/|[\w/]+\.py))*)(?=[\s,:]|$)")


def listed_paths(block: str) -> set[str]:
    """Paths (relative to src/mainspring) the layout names, by indentation.

    An entry starts a line at an even indentation of at most 16 spaces: one or
    more names (``x.py``, ``dir/``, ``a.py, b.py``); a ``dir/`` entry opens
    that folder for the entries indented under it.
    """
    lines = block.splitlines()
    assert lines[0].strip() == "src/mainspring/", "the layout starts at src/mainspring/"
    stack: list[tuple[int, str]] = []  # (indentation, folder)
    paths: set[str] = set()
    for line in lines[1:]:
        found = ENTRY.match(line)
        if not found or len(found.group(1)) > 16 or len(found.group(1)) % 2:
            continue
        indent = len(found.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        folder = stack[-1][1] if stack else ""
        names = found.group(2).split(", ")
        for name in names:
            paths.add(folder + name)
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, folder + names[0]))
    return paths


def test_the_layout_reader_follows_indentation() -> None:
    block = (
        "src/mainspring/\n  a.py         text\n                   more.py not an entry\n"
        "  pkg/\n    b.py, c.py  two\n    sub/x.py    deeper\n  d.py\n"
    )
    assert listed_paths(block) == {"a.py", "pkg/", "pkg/b.py", "pkg/c.py", "pkg/sub/x.py", "d.py"}


def code_paths() -> set[str]:
    paths: set[str] = set()
    for path in SRC.rglob("*"):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(SRC).as_posix()
        if path.is_dir() and (path / "__init__.py").exists():
            paths.add(relative + "/")
        elif path.suffix == ".py" and path.name not in {"__init__.py", "__main__.py"}:
            paths.add(relative)
    return paths


def test_architecture_lists_only_modules_that_exist() -> None:
    listed = listed_paths(layout_block())
    stale = sorted(p for p in listed if not (SRC / p.rstrip("/")).exists())
    assert not stale, f"docs/architecture.md lists what src/mainspring does not have: {stale}"


def test_architecture_lists_every_package_and_module() -> None:
    unlisted = sorted(code_paths() - listed_paths(layout_block()))
    assert not unlisted, f"docs/architecture.md's layout is missing: {unlisted}"
