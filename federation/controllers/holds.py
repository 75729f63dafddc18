"""Capacity a preemption freed, held for its preemptor until it is placed, for a bounded time.

The core returns, with each preemption, a reservation: the preemptor's estimated place in what
its victims (or the replicas it shrank from elastic jobs) free. The loop passes it back in every
snapshot so that nothing else takes that capacity while they leave, and while the cluster still
reports them the reservation is short and the preemptor waits rather than preempting again
(the core's `State.awaiting`). If something outside the hub takes the capacity they free, the
reservation would stay short for ever and the preemptor would never look for other victims.
So a hold lasts until the victims' pods must be gone (the longest of their jobs' grace
periods, `DEFAULT_GRACE_SECONDS` for those that name none) plus a margin; then it is dropped,
and the preemptor waits, fits or preempts as any pending job does.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

from federation.scheduling.decisions import CycleResult, Preempted
from federation.scheduling.model import Job, Placement
from federation.spec import DEFAULT_GRACE_SECONDS


@dataclass(frozen=True, slots=True)
class Hold:
    """A preemptor's reservation and the wall-clock time after which it is dropped."""

    reservation: Placement
    until: float


def _grace(job: Job) -> float:
    return job.grace_s if job.grace_s is not None else DEFAULT_GRACE_SECONDS


def evicted(preempted: Preempted) -> Iterable[Job]:
    """The jobs whose pods (all, or the replicas a shrink removed) the preemption deletes."""
    yield from (v.job for v in preempted.victims)
    yield from (r.before.job for r in preempted.shrunk)


class Holds:
    """The preemptors' holds, by preemptor id."""

    def __init__(self, margin_s: float) -> None:
        self.margin_s = margin_s  # beyond the victims' grace periods
        self._held: dict[str, Hold] = {}

    def __len__(self) -> int:
        return len(self._held)

    def reservations(self, pending: Container[str]) -> tuple[Placement, ...]:
        """The reservations of the preemptors still in `pending`, for the next snapshot."""
        return tuple(h.reservation for job_id, h in self._held.items() if job_id in pending)

    def expire(self, now: float) -> list[Hold]:
        """Drop and return the holds whose time is up."""
        gone = [h for h in self._held.values() if h.until < now]
        for hold in gone:
            del self._held[hold.reservation.job.id]
        return gone

    def settle(self, result: CycleResult, now: float, pending: Container[str]) -> None:
        """After a cycle is written: placed preemptors give their holds back, new preemptions
        hold theirs, and holds of jobs no longer pending (cancelled, rejected) are dropped."""
        for placed in result.placed:
            self._held.pop(placed.placement.job.id, None)
        for preempted in result.preempted:
            leave = max((_grace(j) for j in evicted(preempted)), default=0.0)
            self._held[preempted.preemptor.id] = Hold(
                preempted.reservation, now + leave + self.margin_s
            )
        self._held = {k: h for k, h in self._held.items() if k in pending}
