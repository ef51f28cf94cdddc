"""LeaseKeeper: a run's lease renewal, a loop timer until the first renewal is due."""

from __future__ import annotations

import logging

import anyio
import pytest

from mainspring._lowlevel.wakeup import Wakeup
from mainspring._run.lease import LeaseKeeper, now

pytestmark = pytest.mark.anyio


async def test_a_run_that_stops_before_the_renewal_is_due_never_renews(anyio_backend: str) -> None:
    renewed: list[str] = []

    async def renew(stop: Wakeup) -> None:
        renewed.append("renewed")
        await stop.wait()

    keeper = LeaseKeeper(renew)
    keeper.start(now() + 0.05)
    with anyio.fail_after(60):
        await keeper.stop()
    await anyio.sleep(0.1)  # past the due time: a cancelled timer never fires
    # On asyncio no renewal ever started; trio has no loop timer, so its renewal
    # task starts at once (it then waits for the due time itself).
    if anyio_backend == "asyncio":
        assert renewed == []


async def test_a_due_renewal_runs_until_stopped_and_stop_waits_for_it() -> None:
    started = anyio.Event()
    finished: list[str] = []

    async def renew(stop: Wakeup) -> None:
        started.set()
        await stop.wait()
        await anyio.sleep(0.01)  # a renewal in flight when the run stops
        finished.append("done")

    keeper = LeaseKeeper(renew)
    keeper.start(now())  # due at once
    with anyio.fail_after(60):
        await started.wait()
        await keeper.stop()
    assert finished == ["done"]  # stop returned only once the renewal was over


async def test_a_renewal_that_fails_is_logged_and_stop_still_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed = anyio.Event()

    async def renew(stop: Wakeup) -> None:
        failed.set()
        raise RuntimeError("the lock store is gone")

    keeper = LeaseKeeper(renew)
    with caplog.at_level(logging.ERROR, logger="mainspring.session"):
        keeper.start(now())
        with anyio.fail_after(60):
            await failed.wait()
            await anyio.sleep(0.01)
            await keeper.stop()
    assert "the lease renewal failed" in caplog.text
