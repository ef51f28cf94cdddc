"""Tests for the tool registry: namespacing, duplicates and allowlists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.errors import ConfigError
from mainspring.tools import Tool, ToolRegistry, matches, matches_any, namespaced, tool


def make(name: str) -> Tool:
    def body() -> str:
        """Do nothing."""
        return name

    return tool(name=name)(body)


NAMES = ["get_balance", "get_price", "send_payment", "mcp__github__create_issue", "getter"]


def registry() -> ToolRegistry:
    return ToolRegistry(make(n) for n in NAMES)


def allowed_names(reg: ToolRegistry, allowlist: list[str] | None) -> list[str]:
    return [t.name for t in reg.allowed(allowlist)]


def test_namespaced_default_and_custom_prefix() -> None:
    assert namespaced("github", "create_issue") == "mcp__github__create_issue"
    assert namespaced("fs", "read", prefix="ext") == "ext__fs__read"


@pytest.mark.parametrize("group", ["git__hub", "__", "a__b__c"])
def test_namespaced_rejects_double_underscore_group(group: str) -> None:
    with pytest.raises(ConfigError, match="must not contain '__'"):
        namespaced(group, "x")


def test_add_get_contains_len_iter() -> None:
    reg = ToolRegistry()
    assert len(reg) == 0
    a, b = make("a"), make("b")
    assert reg.add(a) is a
    reg.add(b)
    assert len(reg) == 2
    assert "a" in reg
    assert "c" not in reg
    assert reg.get("b") is b
    assert reg.get("c") is None
    assert list(reg) == [a, b]


def test_add_with_group_renames() -> None:
    reg = ToolRegistry()
    original = make("create_issue")
    added = reg.add(original, group="github")
    assert added.name == "mcp__github__create_issue"
    assert original.name == "create_issue"
    assert reg.get("mcp__github__create_issue") is added
    assert "create_issue" not in reg
    assert added.input_schema == original.input_schema
    assert added.fn is original.fn


def test_add_with_group_and_prefix() -> None:
    reg = ToolRegistry()
    added = reg.add(make("read"), group="fs", prefix="ext")
    assert added.name == "ext__fs__read"
    assert [t.name for t in reg] == ["ext__fs__read"]


def test_add_with_bad_group_is_config_error() -> None:
    reg = ToolRegistry()
    with pytest.raises(ConfigError, match="must not contain '__'"):
        reg.add(make("read"), group="my__server")
    assert len(reg) == 0


def test_namespaced_name_over_64_chars_is_config_error() -> None:
    reg = ToolRegistry()
    with pytest.raises(ConfigError, match="tool name"):
        reg.add(make("x" * 60), group="github")
    assert len(reg) == 0


def test_duplicate_name_is_config_error() -> None:
    reg = ToolRegistry([make("a")])
    first = reg.get("a")
    with pytest.raises(ConfigError, match="already registered"):
        reg.add(make("a"))
    assert reg.get("a") is first
    assert len(reg) == 1


def test_duplicate_in_constructor_is_config_error() -> None:
    with pytest.raises(ConfigError, match="'a' is already registered"):
        ToolRegistry([make("a"), make("b"), make("a")])


def test_duplicate_after_namespacing_is_config_error() -> None:
    reg = ToolRegistry()
    reg.add(make("create_issue"), group="github")
    with pytest.raises(ConfigError, match="mcp__github__create_issue"):
        reg.add(make("create_issue"), group="github")
    # Same tool name in another group is fine.
    reg.add(make("create_issue"), group="gitlab")
    assert len(reg) == 2


def test_remove() -> None:
    reg = registry()
    reg.remove("get_price")
    assert "get_price" not in reg
    reg.remove("no_such_tool")
    assert len(reg) == len(NAMES) - 1
    reg.add(make("get_price"))
    assert "get_price" in reg


def test_allowed_none_allows_all() -> None:
    assert allowed_names(registry(), None) == NAMES


def test_allowed_empty_allows_none() -> None:
    assert allowed_names(registry(), []) == []


@pytest.mark.parametrize(
    ("allowlist", "expected"),
    [
        (["send_payment"], ["send_payment"]),
        (["get_balance", "send_payment"], ["get_balance", "send_payment"]),
        (["get_*"], ["get_balance", "get_price"]),
        (["get*"], ["get_balance", "get_price", "getter"]),
        (["mcp__github__*"], ["mcp__github__create_issue"]),
        (["mcp__gitlab__*"], []),
        (["*"], NAMES),
        (["get_"], []),
        (["get_balance*"], ["get_balance"]),
        (["send_payment", "mcp__*"], ["send_payment", "mcp__github__create_issue"]),
        (["nope"], []),
    ],
)
def test_allowed_patterns(allowlist: list[str], expected: list[str]) -> None:
    assert allowed_names(registry(), allowlist) == expected


def test_star_only_at_end_is_a_wildcard() -> None:
    # A '*' elsewhere is a literal character, not a glob.
    assert not matches("get_*_price", "get_the_price")
    assert matches("get_*_price", "get_*_price")
    assert not matches("*_price", "get_price")


def test_matches_any() -> None:
    assert matches_any(["a", "get_*"], "get_x")
    assert matches_any(["a", "get_*"], "a")
    assert not matches_any(["a", "get_*"], "b")
    assert not matches_any([], "a")


names_text = st.text(alphabet="ab_*", max_size=8)


@settings(max_examples=200)
@given(prefix=names_text, name=names_text)
def test_prefix_wildcard_matches_exactly_names_starting_with_prefix(prefix: str, name: str) -> None:
    assert matches(prefix + "*", name) is name.startswith(prefix)


@settings(max_examples=100)
@given(prefix=names_text, suffix=names_text)
def test_prefix_wildcard_matches_every_extension(prefix: str, suffix: str) -> None:
    assert matches(prefix + "*", prefix + suffix)


@settings(max_examples=200)
@given(pattern=names_text.filter(lambda p: not p.endswith("*")), name=names_text)
def test_pattern_without_trailing_star_is_exact(pattern: str, name: str) -> None:
    assert matches(pattern, name) is (pattern == name)
