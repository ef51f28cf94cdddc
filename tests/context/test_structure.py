"""The context package's shape: no import cycle, the compiler's turn and its records."""

from __future__ import annotations

import ast
import weakref
from pathlib import Path

import pytest

import mainspring.context
from mainspring.context import (
    Accounting,
    Compilation,
    ContextCompiler,
    InMemorySink,
    Processor,
)
from mainspring.context.snapshot import CostEstimate
from mainspring.messages import Message
from mainspring.usage import Usage

pytestmark = pytest.mark.anyio

PACKAGE = Path(mainspring.context.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports: at the top, under TYPE_CHECKING or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, as the modules along it, or None."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph[name]):
            found = visit(target, [*path, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found is not None:
            return found
    return None


def test_the_context_package_has_no_import_cycle() -> None:
    """Counting imports under TYPE_CHECKING and inside functions; the package's lazy
    ``__init__`` (which names every module) aside."""
    modules = {
        f"mainspring.context.{path.stem}": path
        for path in PACKAGE.glob("*.py")
        if path.stem != "__init__"
    }
    graph = {name: _imports(path) & modules.keys() - {name} for name, path in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or ())


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


class Seen(Processor):
    """Records the compile it ran in and the turn cache it was given."""

    waits = False

    def __init__(self) -> None:
        super().__init__("seen")
        self.compilations: list[Compilation[Message]] = []

    async def process(self, ctx: Compilation[Message]) -> None:
        self.compilations.append(ctx)
        ctx.turn_cache.setdefault("marker", Marker())


class Marker:
    """A weakly referenceable value to keep in a turn cache."""


async def test_a_compilation_names_its_compiler_and_engine_is_a_deprecated_alias() -> None:
    seen = Seen()
    compiler = ContextCompiler(messages=[Message.user("hi")], processors=[seen])
    await compiler.compile(turn_index=1)
    ctx = seen.compilations[0]
    assert ctx.compiler is compiler
    with pytest.warns(DeprecationWarning, match=r"Compilation\.engine.*Compilation\.compiler"):
        assert ctx.engine is compiler
    assert ctx.count_tokens("some words to count") == compiler.count_tokens("some words to count")
    assert compiler.count_tokens("some words to count") > 0


@pytest.mark.parametrize("accounting", [False, True])
async def test_a_turns_cache_is_shared_by_its_compiles_and_goes_with_the_turn(
    accounting: bool,
) -> None:
    seen = Seen()
    compiler = ContextCompiler(
        messages=[Message.user("hi")],
        processors=[seen],
        accounting=Accounting(sinks=[InMemorySink()]) if accounting else None,
    )
    await compiler.compile(turn_index=1, step=1)
    await compiler.compile(turn_index=1, step=2)
    first, second = seen.compilations
    assert first.turn_cache is second.turn_cache
    marker = weakref.ref(first.turn_cache["marker"])
    await compiler.compile(turn_index=2)
    assert seen.compilations[2].turn_cache == {"marker": seen.compilations[2].turn_cache["marker"]}
    assert seen.compilations[2].turn_cache["marker"] is not marker()
    seen.compilations.clear()
    del first, second
    assert marker() is None, "the ended turn's cache is freed with the turn (no cycle)"
    compiler.end_turn()
    assert (len(compiler.summary) == 2) is accounting


async def test_records_without_accounting_are_empty_and_adoption_carries_them_over() -> None:
    sink = InMemorySink()
    accounted = ContextCompiler(
        messages=[Message.user("hi")], accounting=Accounting(sinks=[sink]), session_id="s"
    )
    compiled = await accounted.compile(turn_index=1)
    usage = Usage(input_tokens=5, output_tokens=2)
    cost = CostEstimate(usd=0.5, priced=True, price_source="configured")
    call = accounted.record_call(compiled, model="m", usage=usage, cost=cost)
    assert call is not None and call.usage == usage
    assert accounted.end_turn() is not None
    plain = ContextCompiler(messages=[Message.user("hi")], session_id="s")
    compiled = await plain.compile(turn_index=1)
    assert plain.record_call(compiled, model="m", usage=usage, cost=cost) is None
    assert plain.end_turn() is None
    assert plain.summary == [] and plain.session_summary().turns == 0
    plain.adopt_telemetry(accounted)
    assert [s.turn_index for s in plain.summary] == [1]
    assert plain.session_summary().turns == 1
    assert plain.session_summary().cost_usd == pytest.approx(0.5)
    fresh: ContextCompiler[Message] = ContextCompiler(session_id="s", accounting=Accounting())
    fresh.adopt_telemetry(ContextCompiler[Message](session_id="s"))  # nothing recorded to carry
    assert fresh.summary == [] and fresh.session_summary().turns == 0
