"""Group commit of single submissions: concurrent `POST /v1/jobs` share one transaction.

While one group is being written, the submissions that arrive wait and form the next group, so
under load a commit (and its fsync) is paid once per group instead of once per job, and nothing
waits for a timer when the hub is idle. Each submission keeps its own outcome (`submit_many`);
a group whose transaction fails is retried one job at a time, so one job that cannot be written
fails alone. A submission is acknowledged only after its group has committed.
"""

from __future__ import annotations

import asyncio
import contextlib

from federation.store import jobs as job_store
from federation.store.database import Database
from federation.store.records import Job

MAX_GROUP = 500


class GroupCommit:
    """Writes queued submissions in groups of at most `max_group`."""

    def __init__(self, db: Database, max_group: int = MAX_GROUP) -> None:
        self.db = db
        self.max_group = max_group
        self._waiting: list[tuple[job_store.NewJob, asyncio.Future[tuple[Job, bool]]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, new: job_store.NewJob) -> tuple[Job, bool]:
        """Queue `new` with the next group; its job and whether it is new once committed (a
        conflicting repeat of its idempotency key raises Conflict)."""
        future: asyncio.Future[tuple[Job, bool]] = asyncio.get_running_loop().create_future()
        self._waiting.append((new, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_groups())
        return await future

    async def _write_groups(self) -> None:
        while self._waiting:
            group = self._waiting[: self.max_group]
            del self._waiting[: self.max_group]
            try:
                await self._write(group)
            except Exception as exc:
                if len(group) == 1:
                    _settle(group[0][1], exc)
                    continue
                for one in group:  # find the job that cannot be written; the others go through
                    try:
                        await self._write([one])
                    except Exception as single:
                        _settle(one[1], single)

    async def _write(
        self, group: list[tuple[job_store.NewJob, asyncio.Future[tuple[Job, bool]]]]
    ) -> None:
        async with self.db.transaction() as conn:
            results = await job_store.submit_many(conn, [new for new, _ in group])
        for (_, future), result in zip(group, results, strict=True):
            _settle(future, result)


def _settle(
    future: asyncio.Future[tuple[Job, bool]], outcome: job_store.Submitted | Exception
) -> None:
    """Hand a waiting submission its outcome, a Conflict or another error being raised to it (a
    client that left has nobody waiting)."""
    with contextlib.suppress(asyncio.InvalidStateError):
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
