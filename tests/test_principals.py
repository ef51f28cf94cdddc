"""Caller identities as store keys: injective, safe, and the same in every store."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.principals import (
    ANONYMOUS,
    MAX_SEGMENT,
    Caller,
    data_scope,
    encode_segment,
    identity_path,
)
from mainspring.stores.artifacts import check_namespace

SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,130}$")


@given(st.text(max_size=200), st.text(max_size=200))
def test_two_texts_encode_alike_only_when_they_are_equal(a: str, b: str) -> None:
    assert (encode_segment(a) == encode_segment(b)) == (a == b)


@given(st.text(max_size=400))
def test_an_encoding_is_one_safe_segment(text: str) -> None:
    encoded = encode_segment(text)
    assert SEGMENT.fullmatch(encoded)
    assert len(encoded) <= max(MAX_SEGMENT, 66)


@given(st.lists(st.text(max_size=40), min_size=1, max_size=4))
def test_a_path_splits_back_into_its_parts(parts: list[str]) -> None:
    assert identity_path(*parts).split("/") == [encode_segment(p) for p in parts]


@given(
    st.text(min_size=1, max_size=80).filter(lambda t: t != "anonymous"),
    st.sampled_from(["user", "engine", "service"]),
    st.text(max_size=80),
)
def test_a_data_scope_is_a_valid_artifact_namespace(who: str, kind: str, agent: str) -> None:
    caller = Caller(who, kind=kind)  # type: ignore[arg-type]  # the kind is sampled from the literals
    assert check_namespace(data_scope(caller, agent)) == data_scope(caller, agent)


def test_similar_names_stay_apart() -> None:
    agents = ("team x", "team/x", "team_x", "team-x", "team__x", "team_2fx", "")
    assert len({encode_segment(a) for a in agents}) == len(agents)
    callers = (Caller("a/b"), Caller("a", kind="engine"), Caller("a"), ANONYMOUS)
    assert len({data_scope(c, "agent") for c in callers}) == len(callers)
    assert data_scope(Caller("alice"), "keeper") == "principal/user/alice/agent/keeper"
    # A caller whose id looks like a path cannot reach into another's scope.
    forged = Caller("alice/agent/keeper")
    assert not data_scope(forged, "x").startswith(data_scope(Caller("alice"), "keeper"))


@pytest.mark.parametrize(
    ("text", "encoded"),
    [("", "_z"), ("a_b", "a__b"), ("a b", "a_20b"), ("é", "_c3_a9"), ("x" * 200, None)],
)
def test_the_encoding_is_as_documented(text: str, encoded: str | None) -> None:
    if encoded is None:
        assert encode_segment(text).startswith("_h") and len(encode_segment(text)) == 66
    else:
        assert encode_segment(text) == encoded
