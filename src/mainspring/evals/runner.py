"""Running a dataset: a fresh session per case, approvals decided per case, bounded concurrency.

Each run of a case does what an application would: it makes the agent (or
takes the one given), opens a new :class:`~mainspring.session.Session`, sends
the case's messages one after another, and answers every pending action with
``Session.resume`` as the case's ``approve`` policy says. Nothing is
bypassed: every call goes through the engine's one dispatch path — its
permissions, guards, budget and approval gate — exactly as in production.
The events are read into a :class:`~mainspring.evals.trace.CaseTrace` and
scored by the case's evaluators, then the dataset's.

Cases run concurrently up to ``concurrency`` (an anyio capacity limiter);
``repeat`` runs each case that many times (a real model answers differently).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, TypeAlias

from mainspring.agent import Agent
from mainspring.errors import ConfigError, MainspringError
from mainspring.evals.checks import Evaluator, Score
from mainspring.evals.dataset import Case, Dataset, decide
from mainspring.evals.judge import LLMJudge
from mainspring.evals.results import CaseResult, EvalReport, ScoreResult
from mainspring.evals.trace import CaseTrace, trace_of

if TYPE_CHECKING:
    from mainspring.events import Event
    from mainspring.models.base import Model
    from mainspring.session import Session

__all__ = ["MAX_DECISIONS", "AgentSource", "evaluate", "run_case"]

AgentSource: TypeAlias = "Agent | Callable[[], Agent | Awaitable[Agent]]"
"""The agent under test, or a function (sync or async) that makes a fresh one per case
(an agent over state, such as a ledger, wants a fresh one)."""

MAX_DECISIONS = 32
"""Pending actions one message of a case may raise before the case is called stuck."""

REJECTION = "Rejected by the eval case's approval policy."
"""The reason an eval's :class:`~mainspring.decisions.Reject` gives."""


async def _agent_of(source: AgentSource, case: Case) -> Agent:
    if isinstance(source, Agent):
        agent = source
    else:
        try:
            made = source()
            agent = await made if inspect.isawaitable(made) else made
        except MainspringError:
            raise
        except Exception as exc:  # the user's factory: its failure is this case's error
            raise ConfigError(f"the agent factory failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(agent, Agent):
            raise ConfigError(f"the agent factory returned {type(agent).__name__}, not an Agent")
    if case.steps is not None:
        from mainspring.models.scripted import ScriptedModel

        # Named as the agent's model, so the agent's prices apply to the script.
        name = agent.model if isinstance(agent.model, str) else agent.model.name
        agent = dataclasses.replace(agent, model=ScriptedModel(case.steps, name=name))
    if case.budget_usd is not None:
        limits = dataclasses.replace(agent.limits, budget_usd=case.budget_usd)
        agent = dataclasses.replace(agent, limits=limits)
    return agent


async def _drive(session: Session, case: Case) -> tuple[list[Event], list[tuple[str, bool]]]:
    """Send the case's messages; decide each pause by its policy, through ``resume``."""
    from mainspring.decisions import Approve, Decision, Reject
    from mainspring.events import ErrorEvent

    events: list[Event] = []
    decisions: list[tuple[str, bool]] = []
    for message in case.messages:
        stream = session.send(message)
        for _ in range(MAX_DECISIONS + 1):
            async with aclosing(stream) as each:
                events.extend([event async for event in each])
            pending = session.pending
            if pending is None or (events and isinstance(events[-1], ErrorEvent)):
                break
            approve = decide(case.approve, pending.name) == "approve"
            if approve and pending.client_executed:
                raise ConfigError(
                    f"{pending.name} is executed by the client: an eval can only reject it "
                    f"(approve: {{{pending.name}: reject}})"
                )
            decision: Decision = Approve() if approve else Reject(REJECTION)
            decisions.append((pending.name, approve))
            stream = session.resume(pending.attempt_id, decision)
        else:
            raise ConfigError(f"more than {MAX_DECISIONS} pending actions for one message")
        if events and isinstance(events[-1], ErrorEvent):
            break
    return events, decisions


def _final_text(session: Session) -> str:
    return next(
        (m.text for m in reversed(session.messages) if m.role == "assistant" and m.text), ""
    )


async def _score(evaluator: Evaluator, trace: CaseTrace) -> ScoreResult:
    try:
        score = await evaluator.evaluate(trace)
    except MainspringError as exc:
        score = Score(evaluator=evaluator.name, passed=False, reason=f"the check failed: {exc}")
    return ScoreResult(
        evaluator=score.evaluator,
        passed=score.passed,
        score=score.score,
        reason=score.reason,
        cost_usd=score.cost_usd,
        tokens=score.usage.input_tokens + score.usage.output_tokens,
    )


def _with_judge(evaluators: Sequence[Evaluator], model: Model | None) -> list[Evaluator]:
    out: list[Evaluator] = []
    for evaluator in evaluators:
        if isinstance(evaluator, LLMJudge):
            if model is not None:
                evaluator = evaluator.with_model(model)
            if evaluator.model is None:
                raise ConfigError(
                    "an LLM judge has no model: give LLMJudge(model=…), judge_model=…, "
                    "or mainspring eval run --judge-model"
                )
        out.append(evaluator)
    return out


async def run_case(
    agent: AgentSource,
    case: Case,
    *,
    evaluators: Sequence[Evaluator] = (),
    repetition: int = 0,
) -> CaseResult:
    """Run ``case`` once in a fresh session and score it.

    ``evaluators`` run after the case's own (a dataset's shared checks). A
    failure to make the agent or to run (a bad script, a client-executed
    tool approved) is the result's ``error``, not an exception. Cancelling
    it closes the session (its run is cancelled as ``Session.aclose`` does).
    """
    from mainspring.session import Session

    session: Session | None = None
    try:
        session = Session(await _agent_of(agent, case))
        events, decisions = await _drive(session, case)
    except MainspringError as exc:
        return CaseResult(
            case=case.name,
            repetition=repetition,
            passed=False,
            error=f"{type(exc).__name__}: {exc}",
            metadata=dict(case.metadata),
        )
    finally:
        if session is not None:
            await session.aclose()
    trace = trace_of(
        events,
        inputs=case.messages,
        decisions=decisions,
        output=_final_text(session),
        usage=session.usage,
        cost_usd=session.cost_usd,
    )
    scores = [await _score(e, trace) for e in (*case.expect, *evaluators)]
    return CaseResult(
        case=case.name,
        repetition=repetition,
        passed=trace.error is None and all(s.passed for s in scores),
        error=trace.error,
        output=trace.output,
        stop_reason=trace.stop_reason,
        calls=[c.as_json() for c in trace.calls],
        asked=list(trace.asked),
        approved=list(trace.approved),
        rejected=list(trace.rejected),
        blocked=list(trace.blocked),
        denied=list(trace.denied),
        cost_usd=trace.cost_usd,
        input_tokens=trace.usage.input_tokens,
        output_tokens=trace.usage.output_tokens,
        scores=scores,
        metadata=dict(case.metadata),
    )


async def evaluate(
    dataset: Dataset,
    agent: AgentSource,
    *,
    concurrency: int = 4,
    repeat: int = 1,
    judge_model: Model | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> EvalReport:
    """Run every case of ``dataset`` ``repeat`` times against ``agent``.

    At most ``concurrency`` runs at once. ``judge_model`` grades the LLM
    judges that have no model of their own. ``on_result`` is called as each
    run finishes (in completion order); the report lists results in the
    dataset's order. Cancelling it cancels the runs in flight and closes
    their sessions.

    Raises:
        ConfigError: ``concurrency`` or ``repeat`` under 1, or an LLM judge
            with no model.
    """
    import anyio

    if concurrency < 1 or repeat < 1:
        raise ConfigError("concurrency and repeat must be at least 1")
    shared = _with_judge(dataset.evaluators, judge_model)
    cases = [
        dataclasses.replace(case, expect=_with_judge(case.expect, judge_model))
        for case in dataset.cases
    ]
    runs = [(case, rep) for case in cases for rep in range(repeat)]
    results: list[CaseResult | None] = [None] * len(runs)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(index: int, case: Case, rep: int) -> None:
        async with limiter:
            result = await run_case(agent, case, evaluators=shared, repetition=rep)
        results[index] = result
        if on_result is not None:
            on_result(result)

    async with anyio.create_task_group() as group:
        for index, (case, rep) in enumerate(runs):
            group.start_soon(one, index, case, rep)
    return EvalReport(
        dataset=dataset.name,
        agent=dataset.agent,
        repeat=repeat,
        concurrency=concurrency,
        results=[r for r in results if r is not None],
    )
