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
(``artifact_list``). Artifacts are filed under the caller's data scope with the
agent (``ctx.data_scope``: ``principal/<kind>/<id>/agent/<agent>``, every part
injectively encoded), so neither another agent nor another principal reads
or lists them.
"""

from __future__ import annotations

from mainspring.stores.artifacts import ArtifactRef, ArtifactStore
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
    """Put ``data`` in the caller's namespace with this agent; the tool output referring to it.

    Raises:
        ConfigError: ``data`` is larger than the store allows.
        StoreError: The store failed (the tool call becomes an error result).
    """
    ref = await store.put(ctx.data_scope, data, name=name, content_type=content_type)
    return ToolOutput(content=reference_text(ref, summary))


def artifact_tools(store: ArtifactStore) -> list[Tool]:
    """``artifact_read`` and ``artifact_list`` over the caller's own artifacts with this agent."""

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
        if namespace != ctx.data_scope:
            raise PermissionError("that artifact is not one of yours")
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
        refs = await store.list(ctx.data_scope, limit=50)
        if not refs:
            return "no artifacts"
        return "\n".join(
            f"- {r.uri} {r.name!r} {r.size} bytes {r.content_type}".replace(" ''", "") for r in refs
        )

    return [artifact_read, artifact_list]
