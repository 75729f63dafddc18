"""Static replay: pods arrive one at a time, never leave, and a pod that does not fit fails."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from federation.nodeplacement import FragModel, FragTracker, PodRequest, Pool, select
from federation.nodeplacement.base import Scorer
from federation.simulation.metrics import Trajectory


@dataclass(frozen=True)
class ReplayOutcome:
    """A replay's event series and its failures."""

    trajectory: Trajectory
    failed_pods: int
    failed_gpu_milli: int


Placed = tuple[int, tuple[int, ...]]  # node index, device indices


class Placement(Protocol):
    """Anything that places one request and says where (None: it failed)."""

    def place(self, req: PodRequest) -> Placed | None:
        """Place `req` and return the chosen node and devices, or None."""
        ...


class Placer:
    """Chooses a node of `pool` for one request, or None; the single-pool case of level 2."""

    def __init__(self, pool: Pool, scorer: Scorer) -> None:
        self.pool = pool
        self.scorer = scorer

    def place(self, req: PodRequest) -> Placed | None:
        """Place `req` on the best node and return it with its devices, or None."""
        feasible = self.pool.feasible(req)
        if not feasible.any():
            return None
        scores = self.scorer.score(req, feasible)
        i = select(scores)
        if i is None:
            return None
        chosen = scores.devices_for(self.pool, i, req)
        self.pool.place(i, req, chosen)
        return i, chosen


def replay(
    pool: Pool,
    placer: Placement,
    requests: Sequence[PodRequest],
    frag_model: FragModel,
) -> ReplayOutcome:
    """Offer `requests` in order to `placer`; record metrics after each."""
    tracker = FragTracker(pool, frag_model)
    n = len(requests)
    arrived = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    frag = np.zeros(n)
    total_arrived = total_used = failed = failed_milli = 0
    for k, req in enumerate(requests):
        total_arrived += req.gpu_milli
        if placer.place(req) is None:
            failed += 1
            failed_milli += req.gpu_milli
        else:
            total_used += req.gpu_milli
        arrived[k] = total_arrived
        used[k] = total_used
        frag[k] = tracker.current().sum()
    return ReplayOutcome(Trajectory(pool.total_milli, arrived, used, frag), failed, failed_milli)
