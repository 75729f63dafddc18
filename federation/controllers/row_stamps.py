"""Job rows kept across cycles: each cycle fetches in full only the rows that were written.

PostgreSQL gives every row version it writes a new `xmin` (the writing transaction's id), so
the `xmin`s of a job's row and of the rows read with it (its tenant, its queue, a held job's
active placement) form a stamp that changes whenever anything the snapshot reads of the job
changes, whoever wrote it: the loop, an agent's report, a user's cancel or priority change,
a queue's update. A cycle reads the stamps of the jobs it needs, a narrow scan, and fetches
in full only the jobs whose stamp is new; what the snapshot derived from an unchanged row (its
`JobRef`, its core model) is kept with it. In one repeatable-read transaction the scan and the
fetch see the same rows; under a weaker one a row fetched newer than its stamp is fetched
again next cycle, never kept stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.lifecycle import HOLDING_STATES
from federation.store.tables import jobs, placements, queues, tenants

Derived = TypeVar("Derived")
Stamp = str  # the xmin of each row a job is read with, joined: compared whole


def job_among(ids: Sequence[uuid.UUID]) -> sa.ColumnElement[bool]:
    """`jobs.id = ANY(:ids)`: one array parameter, so the statement's text (and the server's
    prepared plan) is the same whatever the count, where `IN` writes a parameter per id."""
    return jobs.c.id == sa.any_(sa.bindparam("ids", list(ids), type_=ARRAY(jobs.c.id.type)))


def _stamp(*tables: sa.Table) -> sa.ColumnElement[str]:
    """The `xmin`s of these tables' rows as one text (one column to read and compare)."""
    joined = ", ".join(f"{t.name}.xmin" for t in tables)
    return sa.literal_column(f"concat_ws(':', {joined})", sa.Text).label("stamp")


def of_jobs(*columns: sa.ColumnElement[Any]) -> sa.Select[Any]:
    """`columns` of jobs joined with their tenants and queues."""
    return (
        sa.select(*columns)
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .join(queues, queues.c.id == jobs.c.queue_id)
    )


# a queued job's stamp; a held one's adds its active placement's (`held_from`)
JOB_STAMPS = of_jobs(jobs.c.id, _stamp(jobs, tenants, queues))


def held_from(select: sa.Select[Any]) -> sa.Select[Any]:
    """`select` (of `of_jobs`) narrowed to held jobs, joined with their active placement."""
    return select.join(
        placements,
        sa.and_(placements.c.job_id == jobs.c.id, placements.c.epoch == jobs.c.epoch),
    ).where(jobs.c.state.in_(HOLDING_STATES), placements.c.state == "Active")


HELD_STAMPS = held_from(of_jobs(jobs.c.id, _stamp(jobs, tenants, queues, placements)))


@dataclass(slots=True)
class Stamped(Generic[Derived]):
    """A job's row, the stamp it was read at, and what the snapshot derived from it (None
    until derived)."""

    stamp: Stamp
    row: Any
    derived: Derived | None = None
    seen: int = 0  # the last read whose scan had it


class StampedRows(Generic[Derived]):
    """The rows of the last read by job id, and those of the `retain` reads before it that
    the last scan did not have (a queued job outside the rotating window keeps what was
    derived from it until it comes back, if its stamp is still the same)."""

    def __init__(self, retain: int = 0) -> None:
        self._rows: dict[uuid.UUID, Stamped[Derived]] = {}
        self._retain = retain
        self._reads = 0

    async def read(
        self,
        conn: AsyncConnection,
        scan: Sequence[Any],
        fetch: Callable[[list[uuid.UUID]], sa.Select[Any]],
    ) -> list[Stamped[Derived]]:
        """The jobs of `scan` (rows of job id and stamp, e.g. of `JOB_STAMPS`), in its order:
        those whose stamp changed fetched by the query `fetch` makes of their ids (a select of
        the columns wanted, with `id`; it may return more rows), the others as last read.
        A job is forgotten once `retain` reads have passed without it in their scan."""
        self._reads = reads = self._reads + 1
        known = self._rows
        rows: dict[uuid.UUID, Stamped[Derived] | None] = {}  # None: to fetch, at its place
        changed: list[uuid.UUID] = []
        stamp_of: dict[uuid.UUID, Stamp] = {}
        for job_id, stamp in scan:  # every held job, every cycle: one pass, no copies
            found = known.get(job_id)
            if found is None or found.stamp != stamp:
                changed.append(job_id)
                stamp_of[job_id] = stamp
                rows[job_id] = None
            else:
                found.seen = reads
                rows[job_id] = found
        if changed:
            fresh = {row.id: row for row in await conn.execute(fetch(changed))}
            for job_id in changed:
                row = fresh.get(job_id)
                if row is None:  # gone from what `fetch` selects between scan and fetch
                    del rows[job_id]
                else:
                    rows[job_id] = Stamped(stamp_of[job_id], row, seen=reads)
        current = cast(dict[uuid.UUID, Stamped[Derived]], rows)  # no None is left
        scanned = list(current.values())
        if self._retain:
            for job_id, kept in known.items():
                if job_id not in current and reads - kept.seen <= self._retain:
                    current[job_id] = kept
        self._rows = current
        return scanned
