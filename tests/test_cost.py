"""Tests for token prices and the cost tracker."""

from __future__ import annotations

import pytest

from mainspring.cost import CostTracker, ModelPrice
from mainspring.errors import ConfigError
from mainspring.usage import Usage

SONNET = ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def test_cost_per_million_tokens() -> None:
    price = ModelPrice(input=3.0, output=15.0)
    assert price.cost(Usage(input_tokens=1_000_000)) == pytest.approx(3.0)
    assert price.cost(Usage(output_tokens=1_000_000)) == pytest.approx(15.0)
    assert price.cost(Usage(input_tokens=2_000, output_tokens=500)) == pytest.approx(
        (2_000 * 3.0 + 500 * 15.0) / 1e6
    )
    assert price.cost(Usage()) == 0.0


def test_cache_prices_default_to_input() -> None:
    price = ModelPrice(input=2.0, output=8.0)
    usage = Usage(cache_read_tokens=1_000_000, cache_write_tokens=500_000)
    assert price.cost(usage) == pytest.approx(2.0 + 1.0)


def test_explicit_cache_prices() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=1_000_000,
    )
    assert SONNET.cost(usage) == pytest.approx(3.0 + 0.3 + 3.75 + 15.0)


def test_zero_cache_price_is_not_the_default() -> None:
    price = ModelPrice(input=5.0, output=10.0, cache_read=0.0)
    assert price.cost(Usage(cache_read_tokens=1_000_000)) == 0.0


def test_reasoning_tokens_are_not_billed_twice() -> None:
    # reasoning_tokens are part of output_tokens.
    usage = Usage(output_tokens=1_000_000, reasoning_tokens=400_000)
    assert SONNET.cost(usage) == pytest.approx(15.0)


def test_tracker_records_cost_and_usage() -> None:
    tracker = CostTracker(prices={"sonnet": SONNET})
    first = Usage(input_tokens=1_000, output_tokens=200, requests=1)
    second = Usage(input_tokens=500, cache_read_tokens=4_000, output_tokens=100, requests=1)
    c1 = tracker.record("sonnet", first)
    c2 = tracker.record("sonnet", second)
    assert c1 == pytest.approx((1_000 * 3.0 + 200 * 15.0) / 1e6)
    assert c2 == pytest.approx((500 * 3.0 + 4_000 * 0.3 + 100 * 15.0) / 1e6)
    assert tracker.total_usd == pytest.approx(c1 + c2)
    assert tracker.usage == Usage(
        input_tokens=1_500, cache_read_tokens=4_000, output_tokens=300, requests=2
    )
    assert tracker.unpriced == set()


def test_price_prices_a_call_without_touching_the_totals() -> None:
    tracker = CostTracker(prices={"sonnet": SONNET}, auto_prices=False)
    usage = Usage(input_tokens=1_000, output_tokens=200, requests=1)
    assert tracker.price("sonnet", usage) == pytest.approx((1_000 * 3.0 + 200 * 15.0) / 1e6)
    assert tracker.price("mystery", usage) == 0.0  # no price: costs nothing, never guessed
    assert tracker.unpriced == {"mystery"}  # and is reported
    assert tracker.total_usd == 0.0 and tracker.usage == Usage()


def test_unpriced_model_costs_nothing_and_is_reported() -> None:
    tracker = CostTracker(prices={"sonnet": SONNET})
    usage = Usage(input_tokens=10_000, output_tokens=10_000, requests=1)
    assert tracker.record("mystery", usage) == 0.0
    assert tracker.record("mystery", usage) == 0.0
    assert tracker.record("other", usage) == 0.0
    assert tracker.total_usd == 0.0
    assert tracker.unpriced == {"mystery", "other"}
    # Usage is still counted.
    assert tracker.usage.requests == 3
    assert tracker.usage.input_tokens == 30_000


def test_price_of_does_not_record() -> None:
    tracker = CostTracker(prices={"sonnet": SONNET})
    usage = Usage(output_tokens=1_000_000)
    assert tracker.price_of("sonnet", usage) == pytest.approx(15.0)
    assert tracker.price_of("mystery", usage) is None  # no price known: not guessed
    assert tracker.total_usd == 0.0
    assert tracker.usage == Usage()
    assert tracker.unpriced == set()


def test_no_budget_is_never_exceeded() -> None:
    tracker = CostTracker(prices={"sonnet": SONNET})
    tracker.record("sonnet", Usage(output_tokens=100_000_000))
    assert tracker.total_usd == pytest.approx(1500.0)
    assert tracker.exceeded() is False


def test_budget_exceeded_when_reached() -> None:
    price = ModelPrice(input=1.0, output=1.0)
    tracker = CostTracker(prices={"m": price}, budget_usd=1.0)
    assert tracker.exceeded() is False
    tracker.record("m", Usage(input_tokens=999_999))
    assert tracker.exceeded() is False
    tracker.record("m", Usage(input_tokens=1))
    assert tracker.total_usd == pytest.approx(1.0)
    assert tracker.exceeded() is True
    tracker.record("m", Usage(input_tokens=1_000_000))
    assert tracker.exceeded() is True


def test_unpriced_usage_never_exceeds_budget() -> None:
    tracker = CostTracker(budget_usd=0.5)
    tracker.record("free", Usage(input_tokens=10_000_000))
    assert tracker.exceeded() is False


def test_negative_budget_is_config_error() -> None:
    with pytest.raises(ConfigError, match="budget_usd must not be negative"):
        CostTracker(budget_usd=-0.01)


def test_zero_budget_is_allowed() -> None:
    assert CostTracker(budget_usd=0.0).budget_usd == 0.0


def test_trackers_do_not_share_state() -> None:
    a, b = CostTracker(), CostTracker()
    a.record("x", Usage(requests=1))
    assert b.unpriced == set()
    assert b.usage == Usage()


def test_models_without_a_configured_price_are_priced_by_genai_prices() -> None:
    pytest.importorskip("genai_prices", reason='needs genai-prices (pip install -e ".[test]")')
    usage = Usage(input_tokens=100_000, cache_read_tokens=50_000, output_tokens=10_000)
    tracker = CostTracker()
    cost = tracker.record("anthropic:claude-sonnet-4-5", usage)
    # $3 input + $0.30 cache read + $15 output per million tokens, not double counted.
    assert cost == pytest.approx(0.3 + 0.015 + 0.15)
    big = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000, output_tokens=1_000_000)
    assert tracker.record("anthropic:claude-sonnet-4-5", big) > 18.3  # long-context tier
    assert tracker.unpriced == set()
    assert tracker.record("openai-compatible:llama3.2", usage) == 0.0
    assert tracker.unpriced == {"openai-compatible:llama3.2"}
    offline = CostTracker(auto_prices=False)
    assert offline.record("anthropic:claude-sonnet-4-5", usage) == 0.0


def test_unpriced_sets_are_shared_between_trackers_but_never_leak_between_them() -> None:
    from mainspring.cost import CostTracker

    a, b = CostTracker(auto_prices=False), CostTracker(auto_prices=False)
    a.record("no-price-1", Usage(input_tokens=1))
    b.record("no-price-1", Usage(input_tokens=1))
    b.record("no-price-2", Usage(input_tokens=1))
    a.record("no-price-1", Usage(input_tokens=1))
    assert a.unpriced == {"no-price-1"}
    assert b.unpriced == {"no-price-1", "no-price-2"}
    assert CostTracker().unpriced == frozenset()


def test_names_genai_prices_cannot_price_do_not_load_it() -> None:
    from mainspring.prices import may_have_price

    assert not may_have_price("scripted")  # the offline model's name
    assert not may_have_price("openai-compatible:llama3.2")
    assert not may_have_price("llama3.2")
    assert may_have_price("anthropic:anything")  # a priced provider: genai-prices decides
    assert may_have_price("claude-sonnet-4-5")
    assert may_have_price("gpt-4o-mini")


def test_bare_name_rules_agree_with_the_installed_genai_prices() -> None:
    """A stale rule would leave a priced model unpriced: update ``_BARE_NAMES`` then."""
    pytest.importorskip("genai_prices", reason='needs genai-prices (pip install -e ".[test]")')
    from genai_prices import data

    from mainspring.prices import may_have_price

    def matched(ref: str) -> bool:  # genai-prices' own choice of provider for a bare name
        return any(
            p.model_match is not None and p.model_match.is_match(ref) for p in data.providers
        )

    names = {m.id for p in data.providers for m in p.models} | {
        "scripted", "fake-s1", "llama3.2", "o1-mini", "gpt-4o", "my-claude-bot", "Mistral-large",
        "org/mistral-7b", "qwen2.5", "MiniMax-M2", "GLM-4", "text-embedding-3-small",
    }  # fmt: skip
    names = {n for n in names if ":" not in n}  # a provider part is decided by its provider
    disagree = sorted(n for n in names if may_have_price(n) != matched(n.lower()))
    assert not disagree, f"mainspring.prices._BARE_NAMES is stale for: {disagree[:20]}"
    assert sum(map(may_have_price, names)) > 100  # (the corpus holds priced names)


_FIRST_TURN = '''
import sys

import anyio

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, tool
from mainspring.cost import CostTracker
from mainspring.usage import Usage


@tool(read_only=True)
async def get_balance(account: str) -> float:
    """Current balance of an account."""
    return 42.0


model = ScriptedModel(
    [ScriptedResponse(tool_calls=[ScriptedCall("get_balance", {"account": "a1"})]), "$42."]
)


async def main() -> None:
    session = Session(Agent(model=model, tools=[get_balance]))
    async for _ in session.send("Balance?"):
        pass
    assert session.messages[-1].text == "$42.", session.messages
    assert "genai_prices" not in sys.modules, "an unpriced model's turn loaded genai-prices"
    usage = Usage(input_tokens=100_000, output_tokens=10_000)
    print(CostTracker().record("claude-sonnet-4-5", usage))  # a priced bare name


anyio.run(main)
'''


def test_a_turn_on_a_model_without_a_price_does_not_load_genai_prices() -> None:
    """What a ``mainspring run`` on an offline model pays at start-up (a fresh process)."""
    pytest.importorskip("genai_prices", reason='needs genai-prices (pip install -e ".[test]")')
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FIRST_TURN],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # $3 input + $15 output per million tokens: genai-prices loaded when a price exists.
    assert float(done.stdout) == pytest.approx(0.3 + 0.15)
