"""Huge MCP results: what the client keeps stays bounded, and the model is told the full size.

A real MCP server (the official SDK) answers every call with megabytes of
text. The client used to keep the last 32 results whole for audit (40
results of 20 MB grew the process by 740 MB); now each kept result is cut
to ``audit_chars``, its full size recorded, and the whole result goes to the
artifact store when the manager has one. Retained memory is measured with
tracemalloc (deterministic), not with a clock.
"""

from __future__ import annotations

import base64
import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from mainspring.mcp import McpClientManager
from mainspring.mcp._results import MAX_IMAGE_BYTES, MAX_IMAGES, result_size
from mainspring.stores.artifacts import ArtifactStore
from tests.attacks._mcp_fixtures import hostile, tool

pytestmark = pytest.mark.anyio

OBJ: dict[str, Any] = {"type": "object"}
BIG = 4_000_000
CALLS = 12


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_many_huge_results_keep_memory_bounded(tmp_path: Path) -> None:
    config = hostile(tmp_path, "s", [tool("big", OBJ)], big_chars=BIG, output_budget=1000)
    tracemalloc.start()
    try:
        async with McpClientManager([config], audit_chars=100_000) as manager:
            # the SDK's reader holds its last message (one result, however many calls):
            # measure from after a first call
            await manager.call_tool("s", "big", {})
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(CALLS):
                out = await manager.call_tool("s", "big", {})
                assert not out.is_error
                assert f"[truncated: showing 1000 of {BIG} characters; the rest is dropped]" in (
                    out.content
                )
                assert len(out.content) < 1200
            del out
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
            raws = list(manager.raw_results)
    finally:
        tracemalloc.stop()
    assert len(raws) == CALLS + 1
    for raw in raws:
        assert raw.size == BIG
        assert not raw.complete
        assert raw.truncated
        assert raw.artifact is None
        assert result_size(raw.result) <= 100_000
    # whole results would be 12 x 4 MB = 48 MB more; the audit holds 12 x 100 kB more
    assert retained < BIG, f"{retained:,} bytes retained by {CALLS} more calls"


async def test_a_huge_result_goes_whole_to_the_artifact_store(tmp_path: Path) -> None:
    store = ArtifactStore.local(tmp_path / "artifacts")
    config = hostile(tmp_path, "s", [tool("big", OBJ)], big_chars=BIG, output_budget=1000)
    async with McpClientManager([config], audit_chars=10_000, artifacts=store) as manager:
        out = await manager.call_tool("s", "big", {})
        raw = manager.raw_results[-1]
    assert raw.artifact is not None
    assert raw.artifact.startswith("artifact://mcp/s/")
    assert f"showing 1000 of {BIG} characters; the full result is stored as {raw.artifact}]" in (
        out.content
    )
    assert result_size(raw.result) == 10_000
    whole = json.loads(await store.get(raw.artifact))
    assert whole["content"][0]["text"] == "xy" * (BIG // 2)


async def test_a_small_result_is_kept_whole(tmp_path: Path) -> None:
    config = hostile(tmp_path, "s", [tool("echo", OBJ)])
    async with McpClientManager([config], audit_chars=10_000) as manager:
        out = await manager.call_tool("s", "echo", {"a": 1})
        raw = manager.raw_results[-1]
    assert out.content == 'called echo {"a": 1}'
    assert raw.complete
    assert raw.size == len(out.content)
    assert raw.result.content[0].text == out.content  # type: ignore[union-attr]  # the echo server answers with one text content


async def test_images_in_a_result_are_bounded_in_number_and_bytes(tmp_path: Path) -> None:
    many = (100,) * (MAX_IMAGES + 4)
    config = hostile(tmp_path, "s", [tool("pictures", OBJ)], pictures=many)
    async with McpClientManager([config]) as manager:
        out = await manager.call_tool("s", "pictures", {})
    assert not out.is_error
    assert len(out.images) == MAX_IMAGES
    assert all(base64.b64decode(image.data or "") == b"p" * 100 for image in out.images)
    assert out.content.endswith(
        "[4 image(s) not shown: image/png of 100 bytes, image/png of 100 bytes, "
        "image/png of 100 bytes, image/png of 100 bytes; a result shows at most "
        f"{MAX_IMAGES} images and {MAX_IMAGE_BYTES} bytes of images]"
    )


async def test_images_past_the_byte_limit_are_named_not_kept(tmp_path: Path) -> None:
    third = MAX_IMAGE_BYTES // 3
    over = MAX_IMAGE_BYTES - 2 * third + 1
    sizes = (third, third, over, 10)  # the third overflows by a byte; the small one still fits
    config = hostile(tmp_path, "s", [tool("pictures", OBJ)], pictures=sizes, output_budget=1000)
    async with McpClientManager([config]) as manager:
        out = await manager.call_tool("s", "pictures", {})
        small = await manager.call_tool("s", "pictures", {})  # the manager carries on
    assert [len(base64.b64decode(image.data or "")) for image in out.images] == [third, third, 10]
    assert f"[1 image(s) not shown: image/png of {over} bytes; " in out.content
    assert len(small.images) == 3
