"""Large tool results as artifacts: the model sees a summary and a reference, not the bytes.

A tool that produces something big (a report, a CSV, a page of HTML) stores it
with :func:`artifact_result` and returns what that gives back::

    artifacts = ArtifactStore.local("var/artifacts")

    @tool(read_only=True)
    async def export_orders(ctx: ToolContext) -> ToolOutput:
        \"\"\"All orders as CSV.\"\"\"
        csv = build_csv()
        return await artifact_result(artifacts, ctx, csv.encode(), summary="4,210 orders",
                                     name="orders.csv", content_type="text/csv")

The model gets ``summary`` plus the ``artifact://`` reference; the host fetches
the bytes with :meth:`ArtifactStore.get`. :func:`artifact_tools` lets the model
page through its own artifacts (``artifact_read``) and list them
(``artifact_list``): per-agent namespaces, so one agent never reads another's.
"""

from __future__ import annotations

from mainspring.stores.artifacts import ArtifactRef, ArtifactStore, agent_namespace
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput, tool

__all__ = ["artifact_result", "artifact_tools"]

MAX_READ = 16_000
"""The most bytes one ``artifact_read`` returns."""


def reference_text(ref: ArtifactRef, summary: str) -> str:
    """What the model is shown for a stored artifact."""
    name = f" {ref.name!r}" if ref.name else ""
    return (
        f"{summary.strip()}\n\n[artifact{name}: {ref.uri} · {ref.size} bytes · {ref.content_type}]"
        "\n(read it in pages with artifact_read)"
    )


async def artifact_result(
    store: ArtifactStore,
    ctx: ToolContext,
    data: bytes,
    *,
    summary: str,
    name: str = "",
    content_type: str = "application/octet-stream",
) -> ToolOutput:
    """Put ``data`` in the calling agent's namespace; the tool output that refers to it.

    Raises:
        ConfigError: ``data`` is larger than the store allows.
        StoreError: The store failed (the tool call becomes an error result).
    """
    ref = await store.put(
        agent_namespace(ctx.agent_name), data, name=name, content_type=content_type
    )
    return ToolOutput(content=reference_text(ref, summary))


def artifact_tools(store: ArtifactStore) -> list[Tool]:
    """``artifact_read`` and ``artifact_list`` over the calling agent's own artifacts."""

    @tool(name="artifact_read", read_only=True)
    async def artifact_read(uri: str, ctx: ToolContext, offset: int = 0, length: int = 4000) -> str:
        """Read part of one of your artifacts as text.

        Args:
            uri: The artifact:// reference a tool result gave.
            ctx: The run context (not shown to the model).
            offset: Byte offset to start at.
            length: Bytes to read (at most 16000).
        """
        namespace, _ = ArtifactRef.parse(uri)
        if namespace != agent_namespace(ctx.agent_name):
            raise PermissionError("that artifact belongs to another agent")
        ref = await store.describe(uri)
        chunk = await store.read(uri, offset=max(0, offset), length=max(1, min(length, MAX_READ)))
        end = max(0, offset) + len(chunk)
        text = chunk.decode("utf-8", errors="replace")
        more = f"; more from offset {end}" if end < ref.size else "; the end"
        return f"[bytes {max(0, offset)}-{end} of {ref.size}{more}]\n{text}"

    @tool(name="artifact_list", read_only=True)
    async def artifact_list(ctx: ToolContext) -> str:
        """List your stored artifacts (newest results of your tools).

        Args:
            ctx: The run context (not shown to the model).
        """
        refs = await store.list(agent_namespace(ctx.agent_name), limit=50)
        if not refs:
            return "no artifacts"
        return "\n".join(
            f"- {r.uri} {r.name!r} {r.size} bytes {r.content_type}".replace(" ''", "") for r in refs
        )

    return [artifact_read, artifact_list]
