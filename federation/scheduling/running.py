"""The running placements of the last state built, accounted once: the next state's accounting
is derived from them by the placements that came and went.

A state accounts every running placement: its quota demand per queue, the indexes by job, by
cluster, by queue and by flavor, the elastic ones, the counts per cluster and queue and per
cluster and priority. Most placements of a snapshot are the same objects as in the last one
(the snapshot read keeps a placement while its job's row is unchanged), and accounting them
all each cycle took a tenth of the loop's CPU with 20,000 jobs held. `Running.of` accounts the
placements that came and takes back those that went. No decision depends on the order of the
indexes (the victim search, backfill and elastic growth sort by job id), so the state is the
same as one accounted afresh. A state's own changes (place, evict, resize) index and count
through its copy too (`enter`, `leave`): the rules have one owner.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TypeVar

from federation.scheduling.model import FlavorOption, Placement
from federation.scheduling.quota import demand

K = TypeVar("K")


def options(placement: Placement) -> tuple[FlavorOption | None, ...]:
    """The flavor option each task of a placement runs with."""
    return tuple(placement.option(t) for t in range(len(placement.job.tasks)))


class Running:
    """Running placements accounted: read-only to the states copied from it."""

    __slots__ = (
        "by_cluster",
        "by_flavor",
        "by_queue",
        "demand",
        "elastic",
        "members",
        "placements",
        "preemptible",
        "where",
    )

    def __init__(self) -> None:
        # by id: the placement (kept alive, so that its id names it) and its quota demand
        self.members: dict[int, tuple[Placement, Mapping[str, int]]] = {}
        self.placements: dict[str, Placement] = {}  # by job id
        self.by_cluster: dict[str, dict[str, Placement]] = {}
        self.by_queue: dict[str, dict[str, Placement]] = {}
        self.by_flavor: dict[tuple[str, str], dict[str, Placement]] = {}  # (cluster, flavor)
        self.elastic: dict[str, Placement] = {}
        self.demand: dict[str, Counter[str]] = {}  # quota charged, per queue
        self.where: Counter[tuple[str, str]] = Counter()  # (cluster, queue)
        self.preemptible: dict[str, Counter[int]] = {}  # per cluster: placements by priority

    @classmethod
    def of(cls, placements: Sequence[Placement]) -> Running:
        """`placements` accounted, a copy of its own (the last accounting changes in place,
        and states are built in several threads at once), derived from the last accounting
        when that gives the same; a job listed twice is accounted as a fresh state would (its
        last placement indexed, every one charged), and then the next one is accounted afresh
        too."""
        global _LAST
        with _LOCK:
            last = _LAST
            if last is not None and last._follow(placements):
                return last._copy()
            running = cls()
            for placement in placements:
                running._add(id(placement), placement)
            _LAST = running if len(running.placements) == len(running.members) else None
            return running._copy()

    def _copy(self) -> Running:
        """Its indexes, charges and counts, in a copy of their own (not its members)."""
        copy = Running()
        copy.placements = dict(self.placements)
        copy.by_cluster = {key: dict(found) for key, found in self.by_cluster.items()}
        copy.by_queue = {key: dict(found) for key, found in self.by_queue.items()}
        copy.by_flavor = {key: dict(found) for key, found in self.by_flavor.items()}
        copy.elastic = dict(self.elastic)
        copy.demand = {queue: Counter(charged) for queue, charged in self.demand.items()}
        copy.where = Counter(self.where)
        copy.preemptible = {cluster: Counter(n) for cluster, n in self.preemptible.items()}
        return copy

    def _follow(self, placements: Sequence[Placement]) -> bool:
        """Bring this accounting to `placements`; False when it cannot (a placement or a job
        listed twice), then it is to be discarded."""
        wanted = {id(p): p for p in placements}
        if len(wanted) != len(placements):
            return False
        members = self.members
        for key in members.keys() - wanted.keys():
            self._remove(key)
        for key in wanted.keys() - members.keys():
            self._add(key, wanted[key])
        return len(self.placements) == len(members)

    def _add(self, key: int, placement: Placement) -> None:
        amounts = demand(placement.job, options(placement))
        self.members[key] = (placement, amounts)
        self.demand.setdefault(placement.job.queue, Counter()).update(amounts)
        self.enter(placement)

    def _remove(self, key: int) -> None:
        placement, amounts = self.members.pop(key)
        charged = self.demand[placement.job.queue]
        charged.subtract(amounts)
        for resource in [r for r in amounts if not charged[r]]:
            del charged[resource]
        if not charged:
            del self.demand[placement.job.queue]
        self.leave(placement)

    def enter(self, placement: Placement) -> None:
        """Index and count `placement` (its quota is charged by whoever keeps the ledger: the
        state in a cycle, `demand` across cycles)."""
        job, cluster = placement.job, placement.cluster
        self.placements[job.id] = placement
        self.by_cluster.setdefault(cluster, {})[job.id] = placement
        self.by_queue.setdefault(job.queue, {})[job.id] = placement
        for flavor in placement.flavors:
            if flavor:
                self.by_flavor.setdefault((cluster, flavor), {})[job.id] = placement
        if job.elastic:
            self.elastic[job.id] = placement
        self.where[cluster, job.queue] += 1
        if job.preemptible:
            counts = self.preemptible.get(cluster)
            if counts is None:
                counts = self.preemptible[cluster] = Counter()
            counts[job.priority] += 1

    def leave(self, placement: Placement) -> None:
        """Take `placement` out of the indexes and counts `enter` put it in."""
        job, cluster = placement.job, placement.cluster
        self.placements.pop(job.id, None)
        _unindex(self.by_cluster, cluster, job.id)
        _unindex(self.by_queue, job.queue, job.id)
        for flavor in set(placement.flavors):
            if flavor:
                _unindex(self.by_flavor, (cluster, flavor), job.id)
        self.elastic.pop(job.id, None)
        _uncount(self.where, (cluster, job.queue))
        if job.preemptible:
            counts = self.preemptible[cluster]
            _uncount(counts, job.priority)
            if not counts:
                del self.preemptible[cluster]


def _unindex(index: dict[K, dict[str, Placement]], key: K, job_id: str) -> None:
    entries = index.get(key)
    if entries is not None:
        entries.pop(job_id, None)
        if not entries:
            del index[key]


def _uncount(counts: Counter[K], key: K) -> None:
    counts[key] -= 1
    if not counts[key]:
        del counts[key]


_LAST: Running | None = None  # the last accounting, derived into the next one
_LOCK = threading.Lock()  # derived in place: one at a time (the API's threads build states)
