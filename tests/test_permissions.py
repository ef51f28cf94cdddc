"""Tests for permission evaluation and USD tiers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring.errors import ConfigError, ToolInputError
from mainspring.events import Finding
from mainspring.permissions import (
    Allow,
    CanUseTool,
    Deny,
    PermissionRules,
    UsdTiers,
    Verdict,
    evaluate,
)
from mainspring.tools import Permission, Tool, client_tool, tool, usd
from mainspring.tools.policy import ToolInput


def amount_of(args: ToolInput) -> float | None:
    value = args.get("amount_usd")
    return float(value) if isinstance(value, int | float) else None


@tool
def read_file(path: str, limit: int = 100) -> str:
    """Read a file."""
    return path


@tool(permission="confirm")
def delete_file(path: str) -> str:
    """Delete a file."""
    return path


@tool(permission=usd(amount_of))
def send_payment(to: str, amount_usd: float) -> str:
    """Send money."""
    return to


def _rm_resolver(args: ToolInput) -> Permission:
    return "confirm" if args.get("path") == "/" else "auto"


@tool(name="rm", permission=_rm_resolver)
def rm(path: str) -> str:
    """Remove a path."""
    return path


sign = client_tool(
    "sign",
    description="Sign in the browser.",
    input_schema={
        "type": "object",
        "properties": {"to": {"type": "string"}},
        "required": ["to"],
    },
)


class Recorder:
    """A can_use_tool callback that records its calls and returns a fixed answer."""

    def __init__(self, answer: Allow | Deny | None) -> None:
        self.answer = answer
        self.calls: list[tuple[str, ToolInput]] = []

    def __call__(self, name: str, args: ToolInput) -> Allow | Deny | None:
        self.calls.append((name, args))
        return self.answer


async def judge(
    tool_: Tool,
    args: dict[str, JsonValue],
    *,
    auto_spent: float = 0.0,
    deny: tuple[str, ...] = (),
    allow: tuple[str, ...] = (),
    can_use_tool: CanUseTool | None = None,
    usd_tiers: UsdTiers | None = None,
) -> Verdict:
    rules = PermissionRules(
        deny=deny,
        allow=allow,
        can_use_tool=can_use_tool,
        usd_tiers=usd_tiers or UsdTiers.balanced(),
    )
    return await evaluate(rules, tool_, args, auto_spent=auto_spent)


# --- evaluation order --------------------------------------------------------------------


@pytest.mark.anyio
async def test_deny_list_beats_allow_list_and_callback() -> None:
    cb = Recorder(Allow())
    v = await judge(
        read_file, {"path": "a"}, deny=("read_file",), allow=("read_file",), can_use_tool=cb
    )
    assert v == Verdict(
        outcome="deny",
        input={"path": "a"},
        reason="'read_file' is on the deny list",
        source="deny_list",
    )
    assert cb.calls == []


@pytest.mark.anyio
async def test_deny_list_wildcard() -> None:
    v = await judge(read_file, {"path": "a"}, deny=("read_*",))
    assert v.outcome == "deny"
    assert v.source == "deny_list"
    v = await judge(read_file, {"path": "a"}, deny=("*",))
    assert v.outcome == "deny"


@pytest.mark.anyio
async def test_allow_list_beats_callback_and_default() -> None:
    cb = Recorder(Deny("no"))
    v = await judge(delete_file, {"path": "a"}, allow=("delete_*",), can_use_tool=cb)
    assert v == Verdict(
        outcome="run",
        input={"path": "a"},
        reason="'delete_file' is on the allow list",
        source="allow_list",
    )
    assert cb.calls == []


@pytest.mark.anyio
async def test_allow_list_beats_usd_tiers() -> None:
    v = await judge(send_payment, {"to": "bob", "amount_usd": 1e6}, allow=("send_payment",))
    assert v.outcome == "run"
    assert v.source == "allow_list"
    assert v.amount_usd is None


@pytest.mark.anyio
async def test_unmatched_lists_fall_through_to_default() -> None:
    v = await judge(delete_file, {"path": "a"}, deny=("read_*",), allow=("read_*",))
    assert v.outcome == "confirm"
    assert v.source == "default"


@pytest.mark.anyio
async def test_callback_deny_beats_auto_default() -> None:
    cb = Recorder(Deny("not on weekends"))
    v = await judge(read_file, {"path": "a"}, can_use_tool=cb)
    assert v == Verdict(
        outcome="deny", input={"path": "a"}, reason="not on weekends", source="callback"
    )
    assert cb.calls == [("read_file", {"path": "a"})]


@pytest.mark.anyio
async def test_callback_allow_beats_confirm_default() -> None:
    v = await judge(delete_file, {"path": "a"}, can_use_tool=Recorder(Allow()))
    assert v == Verdict(
        outcome="run", input={"path": "a"}, reason="allowed by callback", source="callback"
    )
    assert v.rewritten is False


@pytest.mark.anyio
async def test_callback_allow_beats_usd_tiers() -> None:
    v = await judge(send_payment, {"to": "bob", "amount_usd": 1e6}, can_use_tool=Recorder(Allow()))
    assert v.outcome == "run"
    assert v.source == "callback"
    assert v.amount_usd is None


@pytest.mark.anyio
async def test_callback_rewrite_is_revalidated() -> None:
    cb = Recorder(Allow(updated_input={"path": "/safe"}))
    v = await judge(read_file, {"path": "/etc/passwd", "limit": 5}, can_use_tool=cb)
    assert v.outcome == "run"
    assert v.source == "callback"
    assert v.rewritten is True
    # Validated: the default for the omitted field is filled in.
    assert v.input == {"path": "/safe", "limit": 100}


@pytest.mark.anyio
async def test_callback_invalid_rewrite_raises_tool_input_error() -> None:
    cb = Recorder(Allow(updated_input={"path": "/safe", "limit": "lots"}))
    with pytest.raises(ToolInputError) as info:
        await judge(read_file, {"path": "a"}, can_use_tool=cb)
    assert info.value.field == "limit"
    assert info.value.tool == "read_file"


@pytest.mark.anyio
async def test_callback_none_falls_through_to_default() -> None:
    cb = Recorder(None)
    auto = await judge(read_file, {"path": "a"}, can_use_tool=cb)
    assert auto == Verdict(outcome="run", input={"path": "a"}, reason="", source="default")
    confirm = await judge(delete_file, {"path": "a"}, can_use_tool=cb)
    assert confirm == Verdict(
        outcome="confirm",
        input={"path": "a"},
        reason="'delete_file' requires confirmation",
        source="default",
    )
    assert [name for name, _ in cb.calls] == ["read_file", "delete_file"]


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", True, Allow, {"allow": True}])
async def test_callback_other_answer_is_config_error(answer: object) -> None:
    def cb(name: str, args: ToolInput) -> Allow | Deny | None:
        return answer  # type: ignore[return-value]  # deliberately wrong

    with pytest.raises(ConfigError, match="must return Allow, Deny or None"):
        await judge(read_file, {"path": "a"}, can_use_tool=cb)


@pytest.mark.anyio
async def test_async_callback() -> None:
    calls: list[str] = []

    async def cb(name: str, args: ToolInput) -> Allow | Deny | None:
        calls.append(name)
        if name == "read_file":
            return Deny("reads are off")
        if name == "delete_file":
            return Allow(updated_input={"path": "/tmp/x"})
        return None

    denied = await judge(read_file, {"path": "a"}, can_use_tool=cb)
    assert (denied.outcome, denied.reason, denied.source) == ("deny", "reads are off", "callback")
    allowed = await judge(delete_file, {"path": "a"}, can_use_tool=cb)
    assert (allowed.outcome, allowed.input, allowed.rewritten) == ("run", {"path": "/tmp/x"}, True)
    default = await judge(rm, {"path": "/"}, can_use_tool=cb)
    assert (default.outcome, default.source) == ("confirm", "default")
    assert calls == ["read_file", "delete_file", "rm"]


@pytest.mark.anyio
async def test_async_callback_invalid_answer_is_config_error() -> None:
    async def cb(name: str, args: ToolInput) -> Allow | Deny | None:
        return "yes"  # type: ignore[return-value]  # deliberately wrong

    with pytest.raises(ConfigError):
        await judge(read_file, {"path": "a"}, can_use_tool=cb)


@pytest.mark.anyio
async def test_resolver_permission_default() -> None:
    assert (await judge(rm, {"path": "/"})).outcome == "confirm"
    assert (await judge(rm, {"path": "/tmp"})).outcome == "run"


# --- USD default -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_usd_default_under_threshold_runs() -> None:
    v = await judge(send_payment, {"to": "bob", "amount_usd": 50.0}, auto_spent=100.0)
    assert v.outcome == "run"
    assert v.source == "default"
    assert v.amount_usd == 50.0
    assert "(balanced)" in v.reason
    assert v.finding == Finding(
        source="default", message=v.reason, tier="financial", action="confirm"
    )


@pytest.mark.anyio
async def test_usd_default_at_threshold_confirms() -> None:
    v = await judge(send_payment, {"to": "bob", "amount_usd": 100.0})
    assert v.outcome == "confirm"
    assert v.amount_usd == 100.0
    assert "$100.00" in v.reason


@pytest.mark.anyio
async def test_usd_default_over_session_cap_confirms() -> None:
    v = await judge(send_payment, {"to": "bob", "amount_usd": 50.0}, auto_spent=460.0)
    assert v.outcome == "confirm"
    assert "session cap" in v.reason


@pytest.mark.anyio
async def test_usd_default_uses_configured_tiers() -> None:
    args: dict[str, JsonValue] = {"to": "bob", "amount_usd": 50.0}
    conservative = await judge(send_payment, args, usd_tiers=UsdTiers.conservative())
    assert conservative.outcome == "confirm"
    assert "(conservative)" in conservative.reason
    aggressive = await judge(send_payment, args, usd_tiers=UsdTiers.aggressive())
    assert aggressive.outcome == "run"


@pytest.mark.anyio
async def test_usd_default_unknown_amount_confirms() -> None:
    # amount_of returns None when the input carries no usable amount.
    v = await judge(send_payment, {"to": "bob"})
    assert v.outcome == "confirm"
    assert v.amount_usd is None
    assert v.reason == "the amount could not be determined"


@pytest.mark.anyio
async def test_policy_finding_for_static_permission() -> None:
    v = await judge(delete_file, {"path": "a"})
    assert v.finding == Finding(
        source="default",
        message="'delete_file' requires confirmation",
        tier="policy",
        action="confirm",
    )


# --- client-executed tools ---------------------------------------------------------------


@pytest.mark.anyio
async def test_client_tool_default_confirms() -> None:
    v = await judge(sign, {"to": "bob"})
    assert v.outcome == "confirm"
    assert v.source == "default"


@pytest.mark.anyio
async def test_client_tool_confirms_even_when_allow_listed() -> None:
    v = await judge(sign, {"to": "bob"}, allow=("*",))
    assert v == Verdict(
        outcome="confirm",
        input={"to": "bob"},
        reason="executed by the client",
        source="allow_list",
    )


@pytest.mark.anyio
async def test_client_tool_confirms_even_when_callback_allows() -> None:
    v = await judge(sign, {"to": "bob"}, can_use_tool=Recorder(Allow()))
    assert (v.outcome, v.source, v.reason) == ("confirm", "callback", "executed by the client")


@pytest.mark.anyio
async def test_client_tool_rewrite_kept_when_confirming() -> None:
    v = await judge(
        sign, {"to": "bob"}, can_use_tool=Recorder(Allow(updated_input={"to": "alice"}))
    )
    assert v.outcome == "confirm"
    assert v.input == {"to": "alice"}
    assert v.rewritten is True


@pytest.mark.anyio
async def test_client_tool_can_be_denied() -> None:
    by_list = await judge(sign, {"to": "bob"}, deny=("sign",), allow=("sign",))
    assert (by_list.outcome, by_list.source) == ("deny", "deny_list")
    by_callback = await judge(sign, {"to": "bob"}, can_use_tool=Recorder(Deny("no signing")))
    assert (by_callback.outcome, by_callback.reason) == ("deny", "no signing")


# --- USD tiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "below", "cap"),
    [
        ("conservative", 10.0, 50.0),
        ("balanced", 100.0, 500.0),
        ("aggressive", 1000.0, 5000.0),
    ],
)
def test_presets(name: str, below: float, cap: float) -> None:
    tiers = UsdTiers.preset(name)
    assert tiers == UsdTiers(name=name, auto_below_usd=below, session_auto_cap_usd=cap)
    assert tiers == getattr(UsdTiers, name)()


def test_default_rules_use_balanced_tiers() -> None:
    assert PermissionRules().usd_tiers == UsdTiers.balanced()


@pytest.mark.parametrize("name", ["", "Balanced", "yolo", "custom"])
def test_unknown_preset_is_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="unknown USD tier preset"):
        UsdTiers.preset(name)


@pytest.mark.parametrize(("below", "cap"), [(-1.0, 10.0), (10.0, -0.01), (-5.0, -5.0)])
def test_negative_thresholds_are_config_errors(below: float, cap: float) -> None:
    with pytest.raises(ConfigError, match="must not be negative"):
        UsdTiers(auto_below_usd=below, session_auto_cap_usd=cap)


@pytest.mark.parametrize(("below", "cap"), [(math.nan, 10.0), (10.0, math.nan)])
def test_nan_thresholds_are_config_errors(below: float, cap: float) -> None:
    # A NaN threshold makes every comparison false, so the tier would fail open.
    with pytest.raises(ConfigError):
        UsdTiers(auto_below_usd=below, session_auto_cap_usd=cap)


def test_zero_thresholds_confirm_everything() -> None:
    tiers = UsdTiers(auto_below_usd=0.0, session_auto_cap_usd=0.0)
    assert tiers.resolve(0.0, auto_spent=0.0)[0] == "confirm"
    assert tiers.resolve(0.01, auto_spent=0.0)[0] == "confirm"


def test_threshold_boundary() -> None:
    tiers = UsdTiers.balanced()
    assert tiers.resolve(99.99, auto_spent=0.0)[0] == "auto"
    perm, reason = tiers.resolve(100.0, auto_spent=0.0)
    assert perm == "confirm"
    assert reason == "$100.00 is at or above the auto-approve limit $100.00 (balanced)"
    assert tiers.resolve(100.01, auto_spent=0.0)[0] == "confirm"


def test_zero_amount_runs() -> None:
    assert UsdTiers.balanced().resolve(0.0, auto_spent=0.0)[0] == "auto"


def test_session_cap_boundary() -> None:
    tiers = UsdTiers.balanced()
    # Reaching the cap exactly is allowed; passing it is not.
    assert tiers.resolve(50.0, auto_spent=450.0)[0] == "auto"
    perm, reason = tiers.resolve(50.0, auto_spent=450.01)
    assert perm == "confirm"
    assert "session cap $500.00" in reason
    assert tiers.resolve(1.0, auto_spent=500.0)[0] == "confirm"


@pytest.mark.parametrize(
    ("amount", "reason"),
    [
        (None, "the amount could not be determined"),
        (math.nan, "the amount could not be determined"),
        (-5.0, "negative amount $-5.00"),
        (-math.inf, "negative amount $-inf"),
    ],
)
def test_undeterminable_or_negative_amounts_confirm(amount: float | None, reason: str) -> None:
    assert UsdTiers.balanced().resolve(amount, auto_spent=0.0) == ("confirm", reason)


def test_infinite_amount_confirms() -> None:
    assert UsdTiers.balanced().resolve(math.inf, auto_spent=0.0)[0] == "confirm"


tiers_strategy = st.one_of(
    st.sampled_from([UsdTiers.conservative(), UsdTiers.balanced(), UsdTiers.aggressive()]),
    st.builds(
        lambda below, cap: UsdTiers(auto_below_usd=below, session_auto_cap_usd=cap),
        st.floats(min_value=0, max_value=1e9),
        st.floats(min_value=0, max_value=1e9),
    ),
)


@settings(max_examples=300)
@given(
    tiers=tiers_strategy,
    amount=st.none() | st.floats(),
    auto_spent=st.floats(allow_nan=False),
)
def test_auto_implies_under_threshold_and_within_cap(
    tiers: UsdTiers, amount: float | None, auto_spent: float
) -> None:
    perm, reason = tiers.resolve(amount, auto_spent=auto_spent)
    assert reason
    if perm == "auto":
        assert amount is not None
        assert 0 <= amount < tiers.auto_below_usd
        assert auto_spent + amount <= tiers.session_auto_cap_usd


@settings(max_examples=200)
@given(
    tiers=tiers_strategy,
    amount=st.floats(min_value=0, max_value=1e9),
    auto_spent=st.floats(min_value=0, max_value=1e9),
)
def test_in_range_amounts_run(tiers: UsdTiers, amount: float, auto_spent: float) -> None:
    expected = amount < tiers.auto_below_usd and auto_spent + amount <= tiers.session_auto_cap_usd
    perm, _ = tiers.resolve(amount, auto_spent=auto_spent)
    assert (perm == "auto") is expected
