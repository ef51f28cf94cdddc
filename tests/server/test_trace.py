"""The trace recorder and its JSON routes, over a real server on loopback."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.agent import Agent
from mainspring.context.snapshot import CallSnapshot, CostEstimate, Segment, TurnSnapshot
from mainspring.demo import DEMO_MESSAGE
from mainspring.errors import ConfigError, RateLimited
from mainspring.models.base import ModelEvent, ModelRequest
from mainspring.models.retry import RetryPolicy, retrying_stream
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.permissions import PermissionRules
from mainspring.server import ServerConfig, TraceRecorder, trace_event
from mainspring.server._recorder import RunTrace
from mainspring.tools.define import tool
from tests.server.conftest import BOB, client_for, config, read_sse

pytestmark = pytest.mark.anyio


async def paid(base: str, *, amount: float = 40) -> tuple[str, list[Any]]:
    """A demo payment approved with an edit: the session and both streams' frames."""
    async with client_for(base) as http:
        session = (await http.post("/v1/sessions")).json()["session_id"]
        first = await read_sse(
            http, "POST", f"/v1/sessions/{session}/messages", json_body={"message": DEMO_MESSAGE}
        )
        pending = next(f.data for f in first if f.event == "pending_action")
        second = await read_sse(
            http,
            "POST",
            f"/v1/sessions/{session}/decisions/{pending['approval_id']}",
            json_body={"decision": "approve", "edits": {"amount_usd": amount}},
        )
    return session, [first, second]


async def test_a_run_records_its_calls_tools_and_pending_action(server_for: Any) -> None:
    base = server_for()
    session, (first, second) = await paid(base)
    async with client_for(base) as http:
        runs = (await http.get("/v1/trace/runs")).json()["runs"]
        assert [r["kind"] for r in runs] == ["decision", "message"]  # newest first
        assert {r["session_id"] for r in runs} == {session}
        assert runs[0]["events"] == len(second) and runs[0]["stop_reason"] == "end_turn"
        assert runs[0]["stream_id"] == second[0].data["stream_id"]
        message = (await http.get(f"/v1/trace/runs/{runs[1]['run_id']}")).json()
    done = first[-1].data
    assert done["stop_reason"] == "pending_action"
    summary = message["summary"]
    assert summary["stream_id"] == first[0].data["stream_id"]
    assert summary["events"] == len(first)
    calls = message["calls"]
    assert len(calls) == done["usage"]["requests"] == 2
    for field in ("input_tokens", "output_tokens", "cache_read_tokens"):
        assert sum(c["usage"][field] for c in calls) == done["usage"][field]
    assert sum(c["cost_usd"] for c in calls) == pytest.approx(done["cost_usd"])
    for call in calls:
        assert sum(r["tokens"] for r in call["by_source"]) == call["tokens"]
        assert sum(r["share"] for r in call["by_module"]) == pytest.approx(1.0)
        assert call["stable_tokens"] <= call["tokens"]
    assert calls[1]["prefix_tokens"] > 0  # the second call re-sent the first one's prefix
    kinds = [(a["kind"], a["name"], a.get("phase")) for a in message["activities"]]
    assert ("tool", "get_balance", "result") in kinds and (
        "tool",
        "lookup_contact",
        "start",
    ) in kinds
    pending = next(a for a in message["activities"] if a["kind"] == "pending")
    assert pending["name"] == "send_payment" and "auto-approve" in pending["reason"]
    assert pending["findings"] == [{"source": "default", "tier": "financial", "action": "confirm"}]


async def test_raw_text_stays_out_unless_the_server_keeps_it(server_for: Any) -> None:
    plain = server_for()
    await paid(plain)
    keeping = server_for(None, config(trace_content=True))
    await paid(keeping)
    for base, keeps in ((plain, False), (keeping, True)):
        async with client_for(base) as http:
            runs = (await http.get("/v1/trace/runs")).json()
            assert runs["include_content"] is keeps
            detail = (await http.get(f"/v1/trace/runs/{runs['runs'][1]['run_id']}")).json()
        text = json.dumps(detail)
        for secret in ("concert tickets", "acct_alice_01", "careful wallet assistant"):
            assert (secret in text) is keeps, (secret, keeps)
        segments = [s for c in detail["calls"] for s in c["segments"]]
        assert all(("content" in s) is keeps for s in segments)
        tool_start = next(a for a in detail["activities"] if a["name"] == "lookup_contact")
        assert ("data" in tool_start) is keeps and "keys" in tool_start


async def test_a_principal_sees_only_its_own_runs(server_for: Any) -> None:
    base = server_for()
    await paid(base)
    async with client_for(base) as alice, client_for(base, BOB) as bob:
        run_id = (await alice.get("/v1/trace/runs")).json()["runs"][0]["run_id"]
        assert (await bob.get("/v1/trace/runs")).json()["runs"] == []
        for path in (f"/v1/trace/runs/{run_id}", f"/v1/trace/runs/{run_id}/report"):
            response = await bob.get(path)
            assert response.status_code == 404 and response.json()["error"]["type"] == "NotFound"
        async with client_for(base, None) as anonymous:
            assert (await anonymous.get("/v1/trace/runs")).status_code == 401
            assert (await anonymous.get(f"/v1/trace/runs/{run_id}")).status_code == 401


async def test_exports_as_json_and_as_the_standalone_report(server_for: Any) -> None:
    base = server_for()
    await paid(base)
    async with client_for(base) as http:
        run_id = (await http.get("/v1/trace/runs")).json()["runs"][1]["run_id"]
        exported = await http.get(f"/v1/trace/runs/{run_id}")
        report = await http.get(f"/v1/trace/runs/{run_id}/report")
    assert exported.headers["content-disposition"].endswith(f'filename="run-{run_id}.json"')
    assert len(exported.json()["snapshots"]) == 1
    assert report.headers["content-type"].startswith("text/html")
    assert "attachment" in report.headers["content-disposition"]
    assert "Content-Security-Policy" in report.text and "<svg" in report.text


async def test_search_keeps_the_runs_matching_every_word(server_for: Any) -> None:
    base = server_for()
    session, _ = await paid(base)
    async with client_for(base) as http:

        async def found(q: str) -> list[str]:
            body = (await http.get("/v1/trace/runs", params={"q": q})).json()
            return [r["kind"] for r in body["runs"]]

        assert await found("send_payment") == ["decision"]
        assert await found("lookup_contact pending_action") == ["message"]
        assert await found(session[:8].upper()) == ["decision", "message"]
        assert await found("no-such-thing") == []


async def test_bounds_drop_the_oldest_runs_and_activities(server_for: Any) -> None:
    base = server_for(None, config(trace_runs=3, trace_activities=2))
    await paid(base)
    await paid(base)
    async with client_for(base) as http:
        runs = (await http.get("/v1/trace/runs")).json()["runs"]
        assert len(runs) == 3
        detail = (await http.get(f"/v1/trace/runs/{runs[2]['run_id']}")).json()
    assert len(detail["activities"]) == 2
    assert detail["summary"]["dropped_activities"] == detail["activities"][-1]["seq"] - 2


async def test_bad_requests_are_refused_clearly(server_for: Any) -> None:
    base = server_for()
    async with client_for(base) as http:
        for params in ({"q": "x" * 201}, {"limit": 0}, {"limit": "many"}):
            response = await http.get("/v1/trace/runs", params=params)
            assert response.status_code == 422
            assert response.json()["error"]["type"] == "InvalidRequest"
        assert (await http.get("/v1/trace/runs/nope")).status_code == 404
        for asset in ("/ui/nope.js", "/ui/..%2F_pages.py", "/ui/chat.html"):
            assert (await http.get(asset)).status_code == 404, asset
        assert (await http.get("/ui/chat.js")).headers["content-type"].startswith("text/javascript")


async def test_without_a_recorder_the_trace_routes_say_so(server_for: Any) -> None:
    base = server_for(None, config(trace_runs=0))
    await paid(base)
    async with client_for(base) as http:
        response = await http.get("/v1/trace/runs")
        assert response.status_code == 404 and "trace_runs=0" in response.json()["error"]["message"]
        assert (await http.get("/trace")).status_code == 200  # the page still loads, and says it


def test_bad_recorder_bounds_are_refused() -> None:
    with pytest.raises(ConfigError, match="trace_runs"):
        ServerConfig(trace_runs=-1)
    with pytest.raises(ConfigError, match="trace_activities"):
        ServerConfig(trace_activities=0)
    with pytest.raises(ConfigError, match="at least one"):
        TraceRecorder(max_runs=0)


class FlakyModel:
    """A model whose first attempt is rate limited; the retry policy tries again."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.failed = False

    @property
    def name(self) -> str:
        return self.inner.name

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async def attempt() -> AsyncIterator[ModelEvent]:
            if not self.failed:
                self.failed = True
                raise RateLimited("slow down", provider="p", retry_after=0.01)
            async for event in self.inner.stream(request):
                yield event

        policy = RetryPolicy(initial_backoff=0.001, max_backoff=0.002, jitter=0.0)
        return retrying_stream(attempt, policy)


async def test_retries_rate_limits_and_application_events_are_activities(
    server_for: Any,
) -> None:
    @tool(read_only=True)
    async def quote(symbol: str) -> str:
        """A quote.

        Args:
            symbol: The ticker.
        """
        trace_event("quote_cache", hit=False, symbol=symbol)
        # the warning the context compiler logs when a committed prefix changes
        logging.getLogger("mainspring.context").warning("transcript prefix changed: %s", "test")
        return "42"

    script = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("quote", {"symbol": "MS"})]), "42 it is."]
    )
    agent = Agent(
        name="quotes",
        model=FlakyModel(script),
        tools=[quote],
        permissions=PermissionRules(allow=("*",)),
    )
    trace_event("outside", x=1)  # no run here: nothing happens
    base = server_for(agent, config())
    async with client_for(base) as http:
        session = (await http.post("/v1/sessions")).json()["session_id"]
        frames = await read_sse(
            http, "POST", f"/v1/sessions/{session}/messages", json_body={"message": "quote MS"}
        )
        assert frames[-1].data["stop_reason"] == "end_turn"
        run_id = (await http.get("/v1/trace/runs")).json()["runs"][0]["run_id"]
        detail = (await http.get(f"/v1/trace/runs/{run_id}")).json()
    activities = detail["activities"]
    assert [m["name"] for m in detail["prefix_mutations"]] == ["transcript prefix changed: test"]
    limited = [a for a in activities if a["kind"] == "rate_limit"]
    assert [(a["name"], a["attempt"]) for a in limited] == [("RateLimited", 2)]
    event = next(a for a in activities if a["kind"] == "event")
    assert event["name"] == "quote_cache" and event["keys"] == ["hit", "symbol"]
    assert "data" not in event  # raw data only where the server keeps content


def _snapshot(session_id: str, tokens: int) -> TurnSnapshot:
    segment = Segment(
        source="user", module="transcript", processor="transcript", slot="history",
        chars=tokens * 4, tokens=tokens, share=1.0, content="secret",
    )  # fmt: skip
    call = CallSnapshot(
        step=1, model="m", tokenizer="t", exact=False, segments=(segment,), chars=tokens * 4,
        tokens=tokens, prefix_tokens=0, stable_tokens=0,
        cost=CostEstimate(usd=0.0, priced=False, price_source="none"),
    )  # fmt: skip
    return TurnSnapshot(session_id=session_id, turn_index=1, calls=(call,), started_at=0.0)


@given(st.lists(st.sampled_from(["s1", "s2", "s3"]), max_size=30), st.integers(1, 5))
def test_a_snapshot_with_no_running_run_of_its_session_is_not_kept(
    sessions: list[str], max_runs: int
) -> None:
    recorder = TraceRecorder(max_runs=max_runs)
    for session_id in sessions:
        recorder.emit(_snapshot(session_id, 3))
    assert len(recorder) == 0 and recorder.runs("anyone") == []


@given(st.integers(0, 60), st.integers(1, 10), st.booleans())
def test_a_run_keeps_its_newest_activities_and_counts_the_rest(
    count: int, bound: int, content: bool
) -> None:
    recorder = TraceRecorder(max_activities=bound, include_content=content)
    run = RunTrace(recorder, session_id="s", principal="p", kind="message")
    for n in range(count):
        run.activity("event", f"e{n}", data={"n": n})
    kept = list(run.activities)
    assert len(kept) == min(count, bound) and run.dropped == count - len(kept)
    assert [a["seq"] for a in kept] == list(range(count - len(kept) + 1, count + 1))
    assert all(("data" in a) is content and a["keys"] == ["n"] for a in kept)
    assert run.summary()["dropped_activities"] == run.dropped
