"""Dispatch: the tool calls of a step judged, paused for a decision, or executed.

Judging runs permissions (deny list, allow list, callback, the tool's own
tier), guards and the preflight check. Executing runs reads as they are (in
parallel, started by the loop mid-stream) and writes shielded from
cancellation, on the write ledger before and after, with results truncated
to the tool's budget. Every call is keyed by its engine id (``Call.id``);
the provider's id is never a key. The :class:`Dispatcher` reads and writes
the :class:`~mainspring.state.Turn` it is handed and keeps only per-run
caches of its own (verdicts, parsed arguments, live tool contexts).
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
import anyio.to_thread

from mainspring._lowlevel.deadline import EXPIRED, finish_by
from mainspring._lowlevel.json_value import JsonValue
from mainspring._lowlevel.library import running_loop
from mainspring._run.durability import Durability
from mainspring._run.judge import Judgement, Refusal, judge
from mainspring._run.outcome import CONTINUE, PAUSED, Continue, Paused
from mainspring._run.results import (
    ERROR_LIMIT,
    details_of,
    failed,
    noted,
    preview_of,
    shortened,
    timed_out,
    timeout_error,
    truncate_result,
)
from mainspring.agent import Agent
from mainspring.decisions import Decision, canonical_input_hash
from mainspring.errors import ToolInputError, ToolTimeout
from mainspring.events import Event, Finding, PendingAction, ToolResult, ToolStart
from mainspring.guards import run_after
from mainspring.hooks import call_auto_executed, call_hook
from mainspring.messages import ToolResultPart
from mainspring.state import Call, SessionState, Turn, WriteRecord, new_call_id
from mainspring.tools.context import ToolContext, ToolSuspended
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import PREVIEW_SOURCE

if TYPE_CHECKING:
    from mainspring._run.spend import Spend

__all__ = ["Dispatcher", "Durability"]


class Dispatcher:
    """Judges and executes the calls of one run's steps."""

    def __init__(
        self,
        *,
        agent: Agent,
        state: SessionState,
        turn_cache: dict[str, Any],
        emit: Callable[[Event], None],
        durable: Durability | None,
        charge: Callable[[float, str], None] | None = None,
        fence: Callable[[], Awaitable[None]] | None = None,
        cost: Spend | None = None,
    ) -> None:
        """Bind to a session's state.

        ``emit`` receives every event; ``charge`` every cost a tool reports
        (``ToolContext.charge``); ``fence`` runs before each write starts and
        raises :class:`~mainspring.errors.LeaseLost` when the run no longer
        holds the session's lock; ``cost`` (the run's spend) tells a tool
        what the session may still spend (``ToolContext.budget_left_usd``).
        """
        self.agent = agent
        self.cost = cost
        self.state = state
        self.turn_cache = turn_cache
        self.emit = emit
        self.durable = durable
        self.charge = charge
        self.fence = fence
        self.cancel_requested = False
        self._refuse = Refusal(state, emit)
        self._write_scope: anyio.CancelScope | None = None
        self._contexts: list[ToolContext] | tuple[()] = ()
        """The ToolContexts of the tools running now (a list from the first one; most
        runs have none)."""
        self.verdicts: dict[str, Judgement] = {}
        """Verdicts of calls judged mid-stream that wait for the serial pass."""
        self.kwargs: dict[str, dict[str, Any]] = {}
        """Python arguments of validated calls, so a call is not validated twice."""
        self._loop = running_loop()
        """The asyncio loop the run's calls run on, asked once (``None`` on trio: reads
        then run in a cancel scope, as writes do)."""
        audit = agent.audit  # where decisions, writes, refusals and findings go on record
        self.audit = None if audit is None else audit.trail(state.session_id, state.principal)

    def cancel(self) -> None:
        """Stop running reads now; let a running write finish within the grace."""
        self.cancel_requested = True
        for ctx in self._contexts:
            ctx._cancel()  # the dispatcher owns the contexts it made
        if self._write_scope is not None:
            grace = anyio.current_time() + self.agent.limits.write_cancel_grace
            self._write_scope.deadline = min(self._write_scope.deadline, grace)

    # (No cancel scope of their own: the durability shields the commits it makes,
    # and a deferred save only marks the state due.)
    async def save(self, *, defer: bool = False) -> None:
        """Persist the state, shielded (a no-op without a store); see :meth:`Durability.save`."""
        if self.durable is not None:
            await self.durable.save(defer=defer)

    async def flush(self) -> None:
        """Before a terminal event: a deferred save now if nothing else would carry it."""
        if self.durable is not None:
            await self.durable.flush()

    async def _ledger(
        self,
        call: Call,
        turn: Turn,
        status: Literal["started", "done", "unknown"],
        attempt: str | None,
    ) -> None:
        """Put the write ``call``'s ``status`` (and its result, once it has one) on the ledger."""
        record = WriteRecord(
            key=call.id,
            tool=call.name,
            status=status,
            attempt_id=attempt,
            turn_index=turn.index,
            result=None if status == "started" else call.result,
        )
        self.state.ledger(record)
        if self.durable is not None:
            await self.durable.record_write(record)

    # ----------------------------------------------------------------- results

    def fail(self, call: Call, message: str) -> None:
        """Give ``call`` an error result the model sees (bounded: never megabytes back)."""
        tool = self.agent.tool(call.name)
        limit = min(ERROR_LIMIT, tool.policy.max_result_chars if tool else ERROR_LIMIT)
        message = truncate_result(message, limit)
        call.result = ToolResultPart(
            tool_use_id=call.id, name=call.name, content=message, is_error=True
        )
        self.emit(ToolResult(tool_use_id=call.id, name=call.name, content=message, is_error=True))

    def record(self, call: Call, output: ToolOutput, limit: int) -> None:
        """Give ``call`` its result, cut to ``limit`` characters."""
        content = truncate_result(output.content, limit)
        call.result = ToolResultPart(
            tool_use_id=call.id,
            name=call.name,
            content=content,
            is_error=output.is_error,
            images=output.images,
        )
        self.emit(
            ToolResult(
                tool_use_id=call.id, name=call.name, content=content, is_error=output.is_error
            )
        )

    # ----------------------------------------------------------------- judging

    async def judge(self, tool: Tool, call: Call) -> Judgement | None:
        """Permissions, guards and preflight; ``None`` when the call got an error result."""
        asked = call.input
        agent = self.agent
        judgement = await judge(
            agent.permissions,
            agent.guards,
            agent.hooks,
            tool,
            call,
            auto_spent=self.state.auto_spent_usd,
            fail=self.fail,
            deny=self._refuse,
            audit=self.audit,
        )
        if call.input is not asked:  # rewritten by the permission callback
            self.kwargs.pop(call.id, None)
        return judgement

    # ---------------------------------------------------------- the serial pass

    async def run_serial(self, turn: Turn) -> Paused | Continue:
        """Run the step's remaining calls in order from ``turn.position``.

        :class:`Paused` when one paused the turn (``turn.position`` then names
        the pending call); :class:`Continue` when every call has its result.
        """
        calls = turn.calls
        while turn.position < len(calls):
            call = calls[turn.position]
            if call.result is not None or call.parallel:
                turn.advance()
                continue
            tool = self.agent.tool(call.name)
            if tool is None:
                self.fail(call, f"tool {call.name!r} is no longer available")
                turn.advance()
                continue
            judged = self.verdicts.pop(call.id, None) or await self.judge(tool, call)
            if judged is None:
                turn.advance()
                continue
            if judged.outcome == "run" and tool.policy.is_write:
                judged = await self._reserve(judged, call.id)
            if judged.outcome == "confirm":
                await self._pause(tool, call, turn, judged)
                return PAUSED
            await anyio.lowlevel.checkpoint_if_cancelled()
            await self.execute(tool, call, turn, judged, write=tool.policy.is_write)
            if turn.status == "paused":  # the call suspended on a nested decision
                return PAUSED
            turn.advance()
        return CONTINUE

    async def _reserve(self, judged: Judgement, key: str) -> Judgement:
        """Count an auto-approved amount against the session's cap, across workers.

        The judging saw this worker's total; the store's add is the one that
        counts: when other workers' auto-approved writes took the session over
        the cap meanwhile, the call asks for approval instead of running. The
        add is held under the call's id ``key``: a process that dies before the
        write's ``started`` entry leaves a hold that recovery gives back.
        """
        amount = judged.amount_usd
        if amount is None:
            return judged
        spent = self.state.auto_spent_usd
        if self.durable is None:
            self.state.set_auto_spent(spent + amount)
            return judged
        tiers = self.agent.permissions.usd_tiers
        with anyio.CancelScope(shield=True):
            total = await self.durable.add_spend(
                "auto", amount, cap=tiers.session_auto_cap_usd, floor=spent, hold=key
            )
        if total is None:
            reason = (
                f"auto-approved spend of this session (all workers) would pass the session cap "
                f"${tiers.session_auto_cap_usd:,.2f} ({tiers.name})"
            )
            return judged.asking(reason)
        self.state.set_auto_spent(total)
        return judged

    async def _pause(
        self,
        tool: Tool,
        call: Call,
        turn: Turn,
        judged: Judgement,
        *,
        attempt_id: str | None = None,
        origin: dict[str, JsonValue] | None = None,
    ) -> None:
        """Pause on ``call`` (a regeneration keeps its ``attempt_id`` and ``origin``)."""
        verdict, report = judged.verdict, judged.report
        assert call.input is not None
        policy = tool.policy
        findings = (verdict.finding, *report.findings)
        if policy.preview is not None:
            text = await preview_of(policy.preview, call.input)
            findings += (Finding(source=PREVIEW_SOURCE, message=text),)
        details = await details_of(policy.details, call.input) if policy.details else {}
        can_regenerate = policy.regenerate is not None and not tool.client_executed
        pending = PendingAction(
            attempt_id=attempt_id or str(uuid.uuid4()),
            tool_use_id=call.id,
            turn_index=turn.index,
            name=call.name,
            input=call.input,
            description=tool.description,
            modifiable_fields=policy.modifiable_fields,
            reason=verdict.reason,
            findings=findings,
            client_executed=tool.client_executed,
            amount_usd=verdict.amount_usd,
            input_hash=canonical_input_hash(call.input),
            details=details,
            can_regenerate=can_regenerate,
            regenerate_input=(origin or call.input) if can_regenerate else None,
        )
        self._wait(turn, pending)

    def _wait(self, turn: Turn, pending: PendingAction) -> None:
        """Pause on ``pending``, with its expiry, quorum, requester and policy version."""
        rules = self.agent.permissions
        terms = rules.approvals.terms(pending, self.state.principal or "", rules.version)
        turn.pause(pending := replace(pending, **terms))
        self.emit(pending)

    async def regenerate(self, tool: Tool, turn: Turn) -> Paused | Continue:
        """A fresh input for the paused call (its tool's ``regenerate``), judged again.

        :class:`Paused` when the turn is paused again on it (same attempt id,
        new input, hash and details); :class:`Continue` when the fresh input
        was refused (permission, guard, preflight): the call then has an error
        result and the turn goes on.

        Raises:
            ToolInputError: The hook's input is not valid for the tool.
            Exception: What the hook raised (the turn stays paused as it was).
        """
        pending = turn.pending
        assert pending is not None and tool.policy.regenerate is not None
        origin = pending.regenerate_input or pending.input
        fresh = tool.policy.regenerate(dict(origin))
        if inspect.isawaitable(fresh):
            fresh = await fresh
        new_input = tool.validate(dict(fresh))
        call = turn.current
        turn.unpause()
        call.input = new_input
        self.kwargs.pop(call.id, None)
        judged = await self.judge(tool, call)
        if judged is None:
            return CONTINUE  # the fresh input was refused: the model is told why
        if judged.outcome == "run":  # the host asked to see it before it runs
            judged = judged.asking("regenerated for review")
        await self._pause(tool, call, turn, judged, attempt_id=pending.attempt_id, origin=origin)
        return PAUSED

    def _suspend(self, tool: Tool, call: Call, turn: Turn, nested: PendingAction) -> None:
        """Pause the turn on the decision a nested run of this call waits for."""
        if call.parallel or turn.status == "paused":
            self.fail(call, f"tool {call.name!r} cannot wait on a decision from a parallel call")
            return
        assert call.input is not None
        pending = PendingAction(
            attempt_id=str(uuid.uuid4()),
            tool_use_id=call.id,
            turn_index=turn.index,
            name=call.name,
            input=call.input,
            description=tool.description,
            modifiable_fields=nested.modifiable_fields,
            reason=f"{nested.name!r} waits for a decision: {nested.reason}".rstrip(": "),
            findings=nested.findings,
            client_executed=nested.client_executed,
            amount_usd=nested.amount_usd,
            nested=nested,
        )
        self._wait(turn, pending)

    # --------------------------------------------------------------- execution

    async def execute(
        self,
        tool: Tool,
        call: Call,
        turn: Turn,
        judged: Judgement | None,
        *,
        write: bool,
        attempt: str | None = None,
        hints: tuple[str, ...] = (),
        decision: Decision | None = None,
        suspended_on: PendingAction | None = None,
        note: str = "",
    ) -> None:
        """Run one call and record its result; never raises except cancellation.

        A serial call may suspend on a nested run's decision
        (``ToolContext.suspend``): the turn then pauses on it instead, and
        ``decision`` is that decision when the call runs again (``suspended_on``
        the nested action it answers).

        ``hints`` (and the hints of ``judged``'s guard report) are added to the
        result the model sees, as an ``after`` guard's are; ``note`` goes before
        the result (what an approver's edits changed in the arguments that ran).
        """
        assert call.input is not None
        args = call.input
        hooks = self.agent.hooks
        if hooks.before_tool_call is not None:
            denial = await call_hook(hooks.before_tool_call(tool, args))
            if denial:
                self.fail(call, denial)
                return
        call.started = True
        self.emit(ToolStart(tool_use_id=call.id, name=call.name, input=args))
        ctx = self._context(tool, call, turn, decision, suspended_on)
        if write and self.fence is not None:
            await self.fence()  # raises LeaseLost: another worker may own the session now
        if write:
            await self._ledger(call, turn, "started", attempt)
        try:
            kwargs = self.kwargs.pop(call.id, None)
            loop = None if write else self._loop
            output, status = await (
                self._invoke(tool, args, ctx, write, kwargs)
                if loop is None
                else self._read(tool, args, ctx, kwargs, loop)
            )
        except ToolSuspended as suspended:
            self._suspend(tool, call, turn, suspended.pending)
            return
        finally:
            if ctx is not None:
                self._contexts.remove(ctx)  # type: ignore[union-attr]  # (a list: it holds ctx)
        before_hints = hints + (judged.report.hints if judged is not None else ())
        if before_hints or self.agent.guards or self.agent.hooks.after_tool_call is not None:
            output = await self._after(tool, args, output, before_hints)
        if write:
            await self._wrote(tool, args, output, judged, status, attempt)
        if len(output.content) > tool.policy.max_result_chars:
            output = await shortened(tool, output)
        limit = max(tool.policy.max_result_chars, len(output.content))  # shortened already
        if write and not output.is_error and tool.policy.post_write_refresh:
            refreshed = await self.refresh(tool, turn, output)
            limit += len(refreshed.content) - len(output.content)  # each read had its own budget
            output = refreshed
        self.record(call, noted(output, note), limit + len(note))
        if write:
            await self._ledger(call, turn, status, attempt)

    async def _wrote(
        self,
        tool: Tool,
        args: dict[str, JsonValue],
        output: ToolOutput,
        judged: Judgement | None,
        status: str,
        attempt: str | None,
    ) -> None:
        """A write ran: on record in the audit log, and told to ``on_auto_executed`` (auto)."""
        auto = judged is not None and judged.verdict.outcome == "run"
        amount = judged.amount_usd if judged is not None else None
        if self.audit is not None:  # before the result is reported
            await self.audit.executed(tool.name, args, output, status, auto, amount, attempt)
        if auto and self.agent.on_auto_executed is not None:
            await call_auto_executed(self.agent.on_auto_executed, tool, args, output, amount)

    def _context(
        self,
        tool: Tool,
        call: Call,
        turn: Turn,
        decision: Decision | None,
        suspended_on: PendingAction | None,
    ) -> ToolContext | None:
        """The ToolContext of a tool that takes one (kept while it runs), else ``None``."""
        if tool.ctx_param is None:
            return None
        ctx = ToolContext(
            session_id=self.state.session_id,
            agent_name=self.agent.name,
            tool_use_id=call.id,
            tool_name=call.name,
            turn_index=turn.index,
            cache=self.turn_cache,
            emit=self.emit,
            charge=self.charge,
            decision=decision,
            suspended_on=suspended_on,
            cost=self.cost,
        )
        if isinstance(self._contexts, tuple):
            self._contexts = []
        self._contexts.append(ctx)
        return ctx

    async def refresh(self, tool: Tool, turn: Turn, output: ToolOutput) -> ToolOutput:
        """A successful write's ``post_write_refresh`` reads, run after it like any read."""
        sections: list[str] = []
        for name in tool.policy.post_write_refresh:
            read = self.agent.tool(name)
            if read is None or not read.policy.read_only:
                sections.append(f"[refreshed {name}] not available to this agent")
                continue
            call = Call(id=new_call_id(), index=-1, name=name)
            try:
                call.input = read.validate({})
            except ToolInputError as exc:
                sections.append(f"[refreshed {name}] cannot run without arguments: {exc}")
                continue
            judged = await self.judge(read, call)
            if judged is not None and judged.outcome != "run":
                sections.append(f"[refreshed {name}] needs approval; not refreshed")
                continue
            if judged is not None:
                await self.execute(read, call, turn, judged, write=False)
            result = call.result
            assert result is not None
            sections.append(f"[refreshed {name}]\n{result.content}")
        extra = "".join(f"\n\n{section}" for section in sections)
        return replace(output, content=output.content + extra)

    async def _invoke(
        self,
        tool: Tool,
        args: dict[str, JsonValue],
        ctx: ToolContext | None,
        write: bool,
        kwargs: dict[str, Any] | None,
    ) -> tuple[ToolOutput, Literal["done", "unknown"]]:
        """A write, or any call on trio: in a cancel scope with the call's deadline."""
        # Every call has a deadline: its tool's own, else the agent's tool_timeout.
        timeout = tool.policy.timeout or self.agent.limits.tool_timeout
        deadline = anyio.current_time() + timeout
        scope = anyio.CancelScope(shield=write, deadline=deadline)
        output: ToolOutput | None = None
        try:
            with scope:
                if write:
                    self._write_scope = scope
                    if self.cancel_requested:
                        scope.deadline = min(
                            deadline, anyio.current_time() + self.agent.limits.write_cancel_grace
                        )
                output = await tool.call(args, ctx, kwargs=kwargs)
            if output is None and not (write and self.cancel_requested):
                raise timeout_error(tool, timeout)
        except ToolSuspended:
            raise
        except ToolTimeout as exc:
            return timed_out(exc), "unknown"
        except Exception as exc:
            return failed(tool, exc), "done"
        finally:
            if write:
                self._write_scope = None
        if output is not None:
            return output, "done"
        message = f"tool {tool.name!r} was cancelled while running; its outcome is unknown"
        return ToolOutput(content=message, is_error=True), "unknown"

    async def _read(
        self,
        tool: Tool,
        args: dict[str, JsonValue],
        ctx: ToolContext | None,
        kwargs: dict[str, Any] | None,
        loop: asyncio.AbstractEventLoop,
    ) -> tuple[ToolOutput, Literal["done", "unknown"]]:
        """A read on asyncio: its first step here, then its deadline only if it waits."""
        timeout = tool.policy.timeout or self.agent.limits.tool_timeout  # (as _invoke's)
        deadline = loop.time() + timeout
        coroutine = tool.call(args, ctx, kwargs=kwargs)
        try:
            try:
                step = coroutine.send(None)
            except StopIteration as stop:  # done without waiting: nothing to stop
                output: ToolOutput = stop.value
                return output, "done"
            output = await finish_by(coroutine, step, loop, deadline)
            if output is EXPIRED:
                raise timeout_error(tool, timeout)
        except ToolSuspended:
            raise
        except ToolTimeout as exc:
            return timed_out(exc), "unknown"
        except Exception as exc:
            return failed(tool, exc), "done"
        return output, "done"

    async def _after(
        self,
        tool: Tool,
        args: dict[str, JsonValue],
        output: ToolOutput,
        before_hints: tuple[str, ...] = (),
    ) -> ToolOutput:
        hints = [*before_hints]
        if self.agent.guards:
            found = await run_after(self.agent.guards, tool, args, output)
            fired = self.agent.hooks.guard_fired
            if fired is not None:
                for finding in found:
                    await call_hook(fired(tool, args, finding))
            hints += [f.message for f in found]
        if hints:
            output = replace(
                output, content=output.content + "".join(f"\n\n[hint] {h}" for h in hints)
            )
        hook = self.agent.hooks.after_tool_call
        if hook is not None:
            replaced = await call_hook(hook(tool, args, output))
            if replaced is not None:
                output = replaced
        return output
