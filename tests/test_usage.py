"""Usage: token counts add up field by field, and totals never double count."""

from __future__ import annotations

import dataclasses
from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.usage import Usage
from tests.strategies import PROPERTY, usages

FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


def test_fields_are_the_documented_counters() -> None:
    assert FIELDS == (
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "reasoning_tokens",
        "requests",
    )


def test_default_is_all_zero() -> None:
    u = Usage()
    assert all(getattr(u, name) == 0 for name in FIELDS)
    assert u.total_input_tokens == 0
    assert u.total_tokens == 0


def test_addition_example() -> None:
    a = Usage(input_tokens=10, cache_read_tokens=2, output_tokens=5, reasoning_tokens=3, requests=1)
    b = Usage(input_tokens=1, cache_write_tokens=7, output_tokens=4, requests=1)
    assert a + b == Usage(
        input_tokens=11,
        cache_read_tokens=2,
        cache_write_tokens=7,
        output_tokens=9,
        reasoning_tokens=3,
        requests=2,
    )


def test_totals_example() -> None:
    u = Usage(
        input_tokens=100,
        cache_read_tokens=20,
        cache_write_tokens=3,
        output_tokens=50,
        reasoning_tokens=40,
        requests=2,
    )
    assert u.total_input_tokens == 123
    # reasoning_tokens is part of output_tokens, not added on top; requests are not tokens.
    assert u.total_tokens == 173


@PROPERTY
@given(a=usages, b=usages)
def test_addition_is_commutative(a: Usage, b: Usage) -> None:
    assert a + b == b + a


@PROPERTY
@given(a=usages, b=usages, c=usages)
def test_addition_is_associative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)


@PROPERTY
@given(a=usages)
def test_zero_is_the_identity(a: Usage) -> None:
    assert a + Usage() == a
    assert Usage() + a == a


@PROPERTY
@given(a=usages, b=usages)
def test_addition_is_field_by_field(a: Usage, b: Usage) -> None:
    total = a + b
    for name in FIELDS:
        assert getattr(total, name) == getattr(a, name) + getattr(b, name), name


@PROPERTY
@given(a=usages, b=usages)
def test_totals_are_additive(a: Usage, b: Usage) -> None:
    assert (a + b).total_input_tokens == a.total_input_tokens + b.total_input_tokens
    assert (a + b).total_tokens == a.total_tokens + b.total_tokens


@PROPERTY
@given(u=usages)
def test_totals_formula(u: Usage) -> None:
    assert u.total_input_tokens == u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    assert u.total_tokens == u.total_input_tokens + u.output_tokens


@PROPERTY
@given(us=st.lists(usages, max_size=8))
def test_sum_of_many_matches_per_field_sums(us: list[Usage]) -> None:
    total = sum(us, Usage())
    assert total == reduce(lambda x, y: x + y, us, Usage())
    for name in FIELDS:
        assert getattr(total, name) == sum(getattr(u, name) for u in us)
    assert total.total_tokens == sum(u.total_tokens for u in us)


def test_addition_returns_a_new_value() -> None:
    a = Usage(input_tokens=1)
    b = Usage(output_tokens=2)
    total = a + b
    assert total is not a
    assert total is not b
    assert a == Usage(input_tokens=1)
    assert b == Usage(output_tokens=2)


def test_usage_is_frozen_and_keyword_only() -> None:
    u = Usage(input_tokens=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.input_tokens = 2  # type: ignore[misc]  # asserting the runtime guard
    with pytest.raises(TypeError):
        Usage(1)  # type: ignore[call-arg]  # asserting kw_only at runtime
    assert hash(u) == hash(Usage(input_tokens=1))
