"""The order in which pending jobs are considered.

Priority first (higher first; the cycle may pass an aged priority); among equal priorities
the queue with the lower weighted dominant resource share in its cohort goes first (fair
sharing, recomputed as the cycle places jobs); then age (`created_at`, older first); then job
id, so the order is total.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator

from federation.scheduling.model import Job


def by_priority(job: Job) -> int:
    """A job's own priority."""
    return job.priority


class PendingOrder:
    """Iterates pending jobs: the best queue head each time, by priority, the queue's current
    dominant share (`share(queue)`, read when a head is queued), age and id.

    A queue's share changes only when one of its own jobs is placed, which happens only right
    after its head was taken, so re-reading it when queuing the next head keeps keys exact.
    """

    def __init__(
        self,
        jobs: Iterable[Job],
        share: Callable[[str], float],
        priority: Callable[[Job], int] = by_priority,
    ) -> None:
        self._share = share
        self._priority: dict[str, int] = {}
        by_queue: dict[str, list[Job]] = {}
        for job in jobs:
            self._priority[job.id] = priority(job)
            by_queue.setdefault(job.queue, []).append(job)
        # each queue's jobs, best last: priority, then age, then id
        self._queues = {
            q: sorted(js, key=lambda j: (-self._priority[j.id], j.created_at, j.id), reverse=True)
            for q, js in by_queue.items()
        }
        self._heads: list[tuple[int, float, float, str, str]] = []
        for queue in sorted(self._queues):
            self._push(queue)

    def _push(self, queue: str) -> None:
        waiting = self._queues[queue]
        if waiting:
            job = waiting[-1]
            key = (-self._priority[job.id], self._share(queue), job.created_at, job.id, queue)
            heapq.heappush(self._heads, key)

    def __iter__(self) -> Iterator[Job]:
        while self._heads:
            queue = heapq.heappop(self._heads)[-1]
            yield self._queues[queue].pop()
            self._push(queue)


def ordered(
    jobs: Iterable[Job], share: Callable[[str], float], priority: Callable[[Job], int] = by_priority
) -> list[Job]:
    """The full order with shares as they are now (for explanations and tests)."""
    return list(PendingOrder(jobs, share, priority))
