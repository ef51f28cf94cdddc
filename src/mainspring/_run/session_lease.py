"""The run lock's lease on one session, as one run of this worker holds it.

A run takes the lease before it starts (:meth:`SessionLease.acquire`, waiting
or refusing while another worker holds it), renews it while it runs (every
third of ``ttl``: :meth:`SessionLease.keep`, started by
:class:`~mainspring._run.lease.LeaseKeeper` only once due), renews it again
before each write (the fence) and drops it at its end. A lease that could not
be renewed is lost: the run stops and records nothing more.
"""

from __future__ import annotations

import logging
from typing import Literal

import anyio

from mainspring._lowlevel.wakeup import Wakeup
from mainspring._run.lease import now
from mainspring.errors import SessionBusy, StoreError
from mainspring.stores.base import RunLock

__all__ = ["SessionLease"]

log = logging.getLogger("mainspring.session")


class SessionLease:
    """One run's hold of a session's run lock: taken, renewed, lost or released."""

    __slots__ = ("leased_at", "lock", "lost", "owner", "session_id", "ttl", "when_busy")

    def __init__(
        self,
        lock: RunLock,
        *,
        session_id: str,
        owner: str,
        ttl: float,
        when_busy: Literal["error", "wait"],
    ) -> None:
        """Hold ``lock`` for ``session_id`` as ``owner``, ``ttl`` seconds per renewal."""
        self.lock = lock
        self.session_id = session_id
        self.owner = owner
        self.ttl = ttl
        self.when_busy = when_busy
        self.leased_at = 0.0
        """When the lease was taken (the event loop's clock)."""
        self.lost = False
        """Whether the run lost the lease (it then records nothing more)."""

    @property
    def renewal_due(self) -> float:
        """When the first renewal is due: a third of ``ttl`` after the acquire."""
        return self.leased_at + self.ttl / 3

    async def acquire(self) -> None:
        """Take the lease; while another worker holds it, refuse or wait (``when_busy``).

        Raises:
            SessionBusy: Another worker holds it and ``when_busy`` is ``"error"``.
        """
        lock = self.lock
        while not await lock.acquire(self.session_id, self.owner, ttl=self.ttl):
            if self.when_busy == "error":
                holder = await lock.holder(self.session_id)
                raise SessionBusy(
                    f"session {self.session_id!r} has an active run on worker {holder!r}"
                )
            await anyio.sleep(min(0.25, self.ttl / 4))
        self.leased_at = now()

    async def renew(self) -> bool:
        """Renew the lease for another ``ttl``; whether it was still this run's."""
        return await self.lock.refresh(self.session_id, self.owner, ttl=self.ttl)

    async def keep(self, stop: Wakeup) -> str | None:
        """Renew until ``stop`` is set; why the lease was lost, if it was.

        (Stopped by being set, not cancelled: a cancel costs.) A store error is
        a blip: it tries again before the lease runs out.
        """
        # The first renewal counts from the acquire, not from this task's start (a
        # process's first run spends a while importing in between).
        wait = self.renewal_due - anyio.current_time()
        while True:
            if await stop.wait_for(max(wait, 0.0)):
                return None
            wait = self.ttl / 3
            try:
                kept = await self.renew()
            except StoreError as exc:
                log.warning("session %s: could not renew the run lock: %s", self.session_id, exc)
                continue
            if not kept:
                if stop.is_set():  # the run's last commit dropped it meanwhile
                    return None
                return "the lease ran out and could not be renewed"

    async def release(self) -> None:
        """Drop the lease (unless it was lost: another worker may hold it now)."""
        if not self.lost:
            await self.lock.release(self.session_id, self.owner)

    async def release_shielded(self) -> None:
        """:meth:`release`, shielded from a cancel (a run that could not start)."""
        with anyio.CancelScope(shield=True):
            await self.release()
