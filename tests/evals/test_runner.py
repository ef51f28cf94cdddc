"""Running cases: a fresh session each, approvals through resume, the facts of each run."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel, JsonValue

from mainspring import ModelPrice, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring.agent import Agent
from mainspring.errors import ConfigError
from mainspring.evals import (
    Approvals,
    Case,
    Contains,
    Dataset,
    Equals,
    JsonOutput,
    LLMJudge,
    MaxCost,
    Regex,
    StopReasonIs,
    ToolCalls,
    evaluate,
    run_case,
)
from tests.evals.agents import Wallet, pay_steps

pytestmark = pytest.mark.anyio


async def test_an_approved_write_runs_once_and_its_facts_are_recorded() -> None:
    wallet = Wallet()
    case = Case(
        name="pay",
        inputs="Pay Alice $20",
        steps=pay_steps(),
        approve="all",
        expect=[
            Equals("Paid."),
            ToolCalls(["balance", {"pay": {"to": "alice", "amount_usd": 20}}]),
            Approvals(asked=["pay"], approved=["pay"], rejected=[], blocked=[]),
        ],
    )
    result = await run_case(wallet.agent(), case)
    assert result.passed, result
    assert wallet.paid == [("alice", 20.0)]
    assert result.calls == [
        {"name": "balance", "args": {}},
        {"name": "pay", "args": {"to": "alice", "amount_usd": 20}},
    ]
    assert result.cost_usd > 0 and result.input_tokens > 0  # priced under the agent's model name


@pytest.mark.parametrize("policy", ["none", {"pay": "reject"}, {"other": "approve"}])
async def test_a_rejected_write_never_runs(policy: object) -> None:
    wallet = Wallet()
    case = Case(
        name="pay",
        inputs="Pay Alice $20",
        steps=pay_steps(final="Not paid."),
        approve=policy,  # type: ignore[arg-type]  # policies of every shape, checked at run time
        expect=[Approvals(asked=["pay"], rejected=["pay"]), ToolCalls(["balance"], of="ran")],
    )
    result = await run_case(wallet.agent(), case)
    assert result.passed, result
    assert wallet.paid == []
    assert result.rejected == ["pay"] and result.approved == []


async def test_a_blocked_write_is_never_asked_and_never_runs() -> None:
    wallet = Wallet()
    case = Case(
        name="mallory",
        inputs="Pay Mallory $20",
        steps=pay_steps(to="mallory", final="Blocked."),
        approve="all",
        expect=[Approvals(asked=[], blocked=["pay"])],
    )
    result = await run_case(wallet.agent(), case)
    assert result.passed, result
    assert wallet.paid == [] and result.blocked == ["pay"]


async def test_a_failing_check_says_why_and_fails_the_case() -> None:
    case = Case(
        name="pay",
        inputs="Pay Alice $20",
        steps=pay_steps(),
        approve="all",
        expect=[
            Contains(["Paid", "receipt"]),
            Approvals(asked=[]),
            ToolCalls(["pay"], mode="exact"),
            Regex(r"^\d+$"),
        ],
    )
    result = await run_case(Wallet().agent(), case)
    assert not result.passed
    reasons = {s.evaluator: (s.passed, s.score, s.reason) for s in result.scores}
    assert reasons["contains"] == (False, 0.5, "missing ['receipt'] in 'Paid.'")
    assert reasons["approvals"][2] == "asked: expected [], got ['pay']"
    assert reasons["tools"][:2] == (False, 0.0)  # exact: pay is not the first call
    assert "expected [pay] (exact), got [balance, pay{" in reasons["tools"][2]
    assert reasons["regex"][0] is False


async def test_a_budget_stops_the_turn_before_the_write() -> None:
    wallet = Wallet()
    case = Case(
        name="budget",
        inputs="Pay Alice $20",
        steps=pay_steps(),
        approve="all",
        budget_usd=0.0,
        expect=[StopReasonIs("budget_exceeded"), ToolCalls([], of="ran"), MaxCost(0.01)],
    )
    result = await run_case(wallet.agent(), case)
    assert result.passed, result
    assert wallet.paid == [] and result.stop_reason == "budget_exceeded"
    over = await run_case(
        wallet.agent(), Case(name="c", inputs="x", steps=["hi"], expect=[MaxCost(0.0)])
    )
    assert not over.passed and "over the limit $0.000000" in over.scores[0].reason


async def test_several_messages_run_in_one_session() -> None:
    wallet = Wallet()
    steps = ["Hello.", *pay_steps()]
    case = Case(
        name="two turns",
        inputs=["Hi", "Pay Alice $20"],
        steps=steps,
        approve={"pay": "approve"},
        expect=[Equals("Paid."), Approvals(asked=["pay"], approved=["pay"])],
    )
    result = await run_case(wallet.agent(), case)
    assert result.passed, result
    assert wallet.paid == [("alice", 20.0)]


async def test_a_run_that_cannot_finish_is_an_error_not_an_exception() -> None:
    case = Case(name="short script", inputs="Pay Alice $20", steps=[pay_steps()[0]], approve="all")
    result = await run_case(Wallet().agent(), case)
    assert not result.passed
    assert result.error is not None and "no response left" in result.error


async def test_a_factory_that_fails_is_the_case_s_error() -> None:
    def broken() -> Agent:
        raise ConfigError("no ledger")

    result = await run_case(broken, Case(name="c", inputs="hi"))
    assert not result.passed and result.error == "ConfigError: no ledger"

    async def buggy() -> Agent:
        raise KeyError("ledger")

    result = await run_case(buggy, Case(name="c", inputs="hi"))
    assert result.error == "ConfigError: the agent factory failed: KeyError: 'ledger'"


async def test_a_client_executed_tool_approved_by_the_policy_is_an_error() -> None:
    from mainspring import client_tool

    sign = client_tool(
        "sign",
        description="Signed in the user's wallet.",
        input_schema={"type": "object", "properties": {"amount_usd": {"type": "number"}}},
    )
    agent = Agent(model=ScriptedModel(["x"]), tools=[sign])
    steps: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall("sign", {"amount_usd": 1})]),
        "done",
    ]
    approved = await run_case(agent, Case(name="c", inputs="sign", steps=steps, approve="all"))
    assert approved.error is not None and "sign is executed by the client" in approved.error
    rejected = await run_case(agent, Case(name="c", inputs="sign", steps=steps, approve="none"))
    assert rejected.passed and rejected.rejected == ["sign"]


class Invoice(BaseModel):
    to: str
    amount_usd: float


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ('{"to": "alice", "amount_usd": 20}', True),
        ('```json\n{"to": "alice", "amount_usd": 20}\n```', True),
        ('{"to": "alice"}', False),
        ("not json", False),
    ],
)
async def test_the_answer_checked_against_a_schema(answer: str, passed: bool) -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount_usd": {"type": "number"}},
        "required": ["to", "amount_usd"],
    }
    case = Case(
        name="c", inputs="x", steps=[answer], expect=[JsonOutput(schema), JsonOutput(Invoice)]
    )
    result = await run_case(Wallet().agent(), case)
    assert [s.passed for s in result.scores] == [passed, passed]
    if answer == '{"to": "alice"}':
        assert "'amount_usd' is a required property" in result.scores[0].reason
        assert "amount_usd: Field required" in result.scores[1].reason


def test_a_bad_json_schema_is_refused_when_the_check_is_made() -> None:
    with pytest.raises(ConfigError, match="not a valid JSON schema"):
        JsonOutput({"type": "nope"})


def judge_model(answer: str) -> ScriptedModel:
    return ScriptedModel([answer] * 8, name="judge-model")


async def test_an_llm_judge_grades_and_its_cost_is_counted_apart() -> None:
    price = {"judge-model": ModelPrice(input=100.0, output=100.0)}
    judge = LLMJudge(
        "Says it paid.",
        model=judge_model('{"pass": true, "score": 0.9, "reason": "it says Paid"}'),
        prices=price,
    )
    case = Case(name="c", inputs="Pay Alice", steps=pay_steps(), approve="all", expect=[judge])
    result = await run_case(Wallet().agent(), case)
    [score] = result.scores
    assert result.passed and score.score == 0.9 and score.reason == "it says Paid"
    assert score.cost_usd > 0 and score.tokens > 0
    alone = await run_case(
        Wallet().agent(), Case(name="c", inputs="Pay Alice", steps=pay_steps(), approve="all")
    )
    assert result.cost_usd == alone.cost_usd  # the judge's spend is not the case's
    request = judge.model.requests[0]  # type: ignore[union-attr]  # the judge's model is the scripted one
    assert "Says it paid." in request.messages[-1].text and "Paid." in request.messages[-1].text


@pytest.mark.parametrize(
    ("answer", "passed", "reason"),
    [
        ('{"pass": false, "score": 0.2, "reason": "no"}', False, "no"),
        ('Sure! {"score": 0.7}', True, ""),
        ('{"pass": true}', True, ""),
        ("I think it is fine.", False, "the judge did not answer with the JSON asked for"),
        ('{"score": "high"}', False, "the judge did not answer with the JSON asked for"),
    ],
)
async def test_a_judge_s_answer_is_read_strictly(answer: str, passed: bool, reason: str) -> None:
    judge = LLMJudge("r", model=judge_model(answer), threshold=0.6)
    result = await run_case(
        Wallet().agent(), Case(name="c", inputs="x", steps=["y"], expect=[judge])
    )
    [score] = result.scores
    assert score.passed is passed and score.reason.startswith(reason)


async def test_a_judge_without_a_model_is_refused_before_anything_runs() -> None:
    wallet = Wallet()
    dataset = Dataset(
        cases=[Case(name="c", inputs="x", steps=pay_steps(), approve="all", expect=[LLMJudge("r")])]
    )
    with pytest.raises(ConfigError, match="an LLM judge has no model"):
        await evaluate(dataset, wallet.agent())
    assert wallet.paid == []
    report = await evaluate(dataset, wallet.agent(), judge_model=judge_model('{"score": 1}'))
    assert report.ok


async def test_cases_run_concurrently_within_the_bound_and_repeat() -> None:
    active = 0
    most = 0
    both = anyio.Event()

    @tool(read_only=True)
    async def wait_for_company() -> str:
        """Waits until two cases are in here at once."""
        nonlocal active, most
        active += 1
        most = max(most, active)
        if active == 2:
            both.set()
        with anyio.fail_after(30):  # only catches a hang: the event is what we wait on
            await both.wait()
        active -= 1
        return "ok"

    def agent() -> Agent:
        return Agent(model=ScriptedModel(["x"]), tools=[wait_for_company])

    steps: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall("wait_for_company")]),
        "done",
    ]
    cases = [
        Case(name=f"c{i}", inputs="go", steps=steps, expect=[Equals("done")]) for i in range(3)
    ]
    seen: list[str] = []
    report = await evaluate(
        Dataset(name="d", cases=cases),
        agent,
        concurrency=2,
        repeat=2,
        on_result=lambda r: seen.append(r.case),
    )
    assert most == 2
    assert report.ok and report.total == 6 and len(seen) == 6
    assert [(r.case, r.repetition) for r in report.results] == [
        (f"c{i}", rep) for i in range(3) for rep in range(2)
    ]


async def test_the_dataset_s_evaluators_run_on_every_case_after_its_own() -> None:
    cases = [Case(name=n, inputs="x", steps=[n], expect=[Contains(n)]) for n in ("a", "b")]
    report = await evaluate(Dataset(cases=cases, evaluators=[Equals("a")]), Wallet().agent())
    assert [[s.evaluator for s in r.scores] for r in report.results] == [["contains", "equals"]] * 2
    assert [r.passed for r in report.results] == [True, False]


async def test_bad_run_options_are_refused() -> None:
    dataset = Dataset(cases=[Case(name="c", inputs="x")])
    for bad in ({"concurrency": 0}, {"repeat": 0}):
        with pytest.raises(ConfigError, match="at least 1"):
            await evaluate(dataset, Wallet().agent(), **bad)  # type: ignore[arg-type]  # the bad input under test
