"""WAL checkpoints off the event loop, for the SQLite stores.

SQLite copies its write-ahead log back into the database file (a checkpoint)
in the commit that grows the log past 1,000 pages: megabytes copied and two
fsyncs, on whichever thread committed. The stores commit on the event loop
(see :meth:`~mainspring.stores._sqlite.Database.run_inline`), so that one
commit would stall every task for milliseconds. Their connection turns the
automatic checkpoint off (``PRAGMA wal_autocheckpoint=0``) and hands the work
to a :class:`WalCheckpointer`: after every :data:`CHECKPOINT_CHANGES` row
changes it runs one passive checkpoint (it never waits for readers or
writers, nor holds them up) on a connection of its own, in a short-lived
daemon thread nobody awaits. Durability is unchanged: a commit is in the log
before it returns, checkpointed or not; a checkpoint cut short (a crash, the
interpreter exiting) is finished by the next one.

A passive checkpoint alone never lets the log start over while writes go on:
SQLite rewinds the log only at a write that finds every frame copied back, and
under steady load new frames always arrived during the copy (the log grew by
about 60 KiB per conversation, without end). So once the log holds
:data:`RESTART_FRAMES` frames, the checkpoint goes on to a ``RESTART`` one: it
holds new writes back (they wait in worker threads, never on the loop) while
it copies the few frames the passive pass left and the readers move on, so
the next commit writes the log from its start again, over the same file
blocks (a file emptied and grown again costs the kernel a third more per
commit); that commit also cuts a longer file back to :data:`LOG_LIMIT`
(``PRAGMA journal_size_limit``, set on the stores' connection). If readers
keep it out for :data:`RESTART_WAIT`, it lets go, and the next checkpoint
tries again.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    import sqlite3

__all__ = ["CHECKPOINT_CHANGES", "LOG_LIMIT", "RESTART_FRAMES", "RESTART_WAIT", "WalCheckpointer"]

log = logging.getLogger("mainspring.stores.sqlite")

CHECKPOINT_CHANGES = 1000
"""Row changes on a connection between two checkpoints (SQLite's own default is
1,000 pages; one change of a store writes about one page)."""

RESTART_FRAMES = 4 * CHECKPOINT_CHANGES
"""Log frames (pages) past which a checkpoint also restarts the log: about 16 MiB."""

LOG_LIMIT = 16 * 2**20
"""Bytes a log file is cut back to when it starts over (``journal_size_limit``)."""

RESTART_WAIT = 0.5
"""Seconds that restarting the log waits for writers and readers before it gives up."""


class WalCheckpointer:
    """Checkpoints one database file's WAL in a thread, one checkpoint at a time."""

    def __init__(
        self,
        path: Path,
        driver: ModuleType,
        *,
        every: int = CHECKPOINT_CHANGES,
        restart_frames: int = RESTART_FRAMES,
    ) -> None:
        """Checkpoint ``path`` (opened with ``driver``) every ``every`` changes.

        A checkpoint that finds ``restart_frames`` frames or more in the log
        also restarts it (see the module's notes).
        """
        self._path = path
        self._driver = driver
        self._every = every
        self._restart_frames = restart_frames
        self._mark = 0
        self._thread: threading.Thread | None = None
        self.checkpoints = 0
        """Checkpoints run to the end (for tests and diagnostics)."""
        self.restarts = 0
        """Checkpoints that restarted the log (for tests and diagnostics)."""

    def changed(self, total_changes: int) -> None:
        """After an operation: ``total_changes`` of the connection it ran on.

        Starts a checkpoint when enough changes piled up since the last one,
        unless one is still running (the next call catches up). Never blocks.
        """
        if total_changes - self._mark < self._every:
            return
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        self._mark = total_changes
        self._thread = threading.Thread(
            target=self._checkpoint, name="mainspring-wal-checkpoint", daemon=True
        )
        self._thread.start()

    def _checkpoint(self) -> None:
        try:
            conn = self._driver.connect(str(self._path), timeout=RESTART_WAIT, isolation_level=None)
            try:
                _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                restarted = frames >= self._restart_frames and self._restart(conn)
            finally:
                conn.close()
        except Exception as exc:  # the log only grows until the next one succeeds
            log.warning("SQLite store %r: WAL checkpoint failed: %s", str(self._path), exc)
            return
        self.checkpoints += 1
        self.restarts += restarted

    @staticmethod
    def _restart(conn: sqlite3.Connection) -> bool:
        """Copy back what is left, so the log starts over; ``False`` if others kept it out."""
        (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        return not busy

    async def join(self) -> None:
        """Wait for a running checkpoint to finish (not abandoned on cancellation)."""
        thread = self._thread
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join)
