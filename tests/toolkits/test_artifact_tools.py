"""A tool returns a large result as an artifact reference; the model pages through it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mainspring import (
    Agent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolContext,
    ToolOutput,
    ToolResult,
    tool,
)
from mainspring.principals import Caller, data_scope
from mainspring.stores.artifacts import ArtifactStore
from mainspring.testing import collect
from mainspring.toolkits.artifacts import artifact_result, artifact_tools

pytestmark = pytest.mark.anyio

BIG = "".join(f"row {i},value {i * 7}\n" for i in range(5000)).encode()


def calling(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    script: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall(name, args)]) for name, args in calls
    ]
    return ScriptedModel([*script, "Done."])


def exporter(store: ArtifactStore) -> Any:
    @tool(read_only=True)
    async def export_rows(ctx: ToolContext) -> ToolOutput:
        """All rows as CSV."""
        return await artifact_result(
            store, ctx, BIG, summary="5000 rows", name="rows.csv", content_type="text/csv"
        )

    return export_rows


async def test_a_large_result_becomes_a_reference_the_host_can_fetch() -> None:
    store = ArtifactStore.memory()
    agent = Agent(name="analyst", model=calling(("export_rows", {})), tools=[exporter(store)])
    events = await collect(Session(agent).send("export"))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content.startswith("5000 rows")
    assert len(result.content) < 400  # the model sees a summary, not 100 kB
    uri = re.search(r"artifact://\S+", result.content)
    assert uri is not None
    assert await store.get(uri.group()) == BIG  # the host fetches the bytes


async def test_the_model_reads_its_artifact_in_pages_but_not_another_agents() -> None:
    store = ArtifactStore.memory()
    own = data_scope(Caller("local", kind="service"), "analyst")  # (no engine: the local caller)
    ref = await store.put(own, BIG, content_type="text/csv")
    foreign = await store.put(data_scope(Caller("local", kind="service"), "other"), b"secret")
    tools = artifact_tools(store)
    agent = Agent(
        name="analyst",
        model=calling(
            ("artifact_read", {"uri": ref.uri, "offset": 0, "length": 20}),
            ("artifact_read", {"uri": foreign.uri}),
            ("artifact_list", {}),
        ),
        tools=tools,
    )
    events = await collect(Session(agent).send("read"))
    page, denied, listing = [e for e in events if isinstance(e, ToolResult)]
    assert page.content.startswith(f"[bytes 0-20 of {len(BIG)}; more from offset 20]")
    assert BIG[:20].decode() in page.content
    assert denied.is_error and "not one of yours" in denied.content
    assert ref.uri in listing.content and foreign.uri not in listing.content
