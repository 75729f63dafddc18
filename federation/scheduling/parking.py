"""Parked jobs: what a cycle found no room for is not tried again until something it could
use appears (kube-scheduler's unschedulable queue, with the whole fleet as the event).

A cycle parks a pending job when nothing changed after its turn: no placement, preemption,
reservation or growth came later in that cycle, so the cycle's final state is the one the job
failed against. It also records that final state: every node's free room (CPU, memory, pods
and each device's use and health), the placements (what could be a victim, and what the quota
ledger charges) and the fleet's cluster facts.

The next cycle skips a parked job (it stays pending with the reasons of its last try) when,
after the state is built and elastic jobs are scaled in, that same job is pending again and
nothing it could use appeared:

- no node it could run on offers more: a node that offers more (CPU, memory, pods, a device's
  room or health) or whose static facts changed wakes the jobs asking any device model it has,
  and every job with a task that takes no accelerator;
- no placement it could take from moved (came, went or changed: replicas, priority,
  preemptibility, queue): one that is preemptible or elastic, of its priority or lower (a victim
  or a shrink), or, when its queue has a quota, one charged to its quota pool (its queue's, or
  its cohort's);
- the queues, the clusters' facts, the placements being evicted and the configuration are the
  same (any change there wakes every parked job).

Under those conditions trying it again gives the same answer: fit is monotone in room, quota
and victim search the same for the same candidates and usage. A job that may earn a
reservation, holds capacity (a preemptor) or whose priority ages is never parked. A parked job
that a cycle does not see (the hub reads a rotating window of a long queue) stays parked only
if that cycle changed nothing at all.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from federation.scheduling.backfill import large_gang
from federation.scheduling.decisions import Pending
from federation.scheduling.devices import NodeDevices
from federation.scheduling.elastic import Asks, asks
from federation.scheduling.flavors import assignments
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import Job, Node, Placement, Queue
from federation.scheduling.state import ClusterState, NodeState, State, static_facts

# a node's room: the node (for its static facts), CPU, memory and pods free, devices by model
NodeRoom = tuple[Node, int, int, int, Mapping[str, NodeDevices]]
# what grew since the jobs were parked: device models, "" for room any task could use
Grown = frozenset[str]
EVERYTHING = None  # a change that wakes every parked job


class Seen(NamedTuple):
    """What the victim search and quota see of a placement (run times and the epoch, the
    agents' fencing token that the hub assigns when it writes a placement, aside)."""

    job: str
    priority: int
    preemptible: bool
    queue: str
    elastic: bool
    cluster: str
    flavors: Hashable
    replicas: Hashable
    tasks: Hashable  # each task's CPU, memory, replicas and elastic bounds


@dataclass(frozen=True, slots=True)
class Parked:
    """Jobs a cycle parked, with the state they failed against (see the module doc)."""

    jobs: Mapping[str, Pending]
    wants: Mapping[str, Asks]  # per job, the device models it could use (None: any room)
    config: SchedulerConfig
    queues: tuple[Queue, ...]
    clusters: tuple[Hashable, ...]  # each cluster's facts apart from its nodes, in order
    rooms: Mapping[str, tuple[NodeRoom, ...]]  # per cluster, per node
    placements: Mapping[str, Placement]  # by job id
    preempting: frozenset[str]  # placements being evicted: no victims

    def skippable(self, state: State, config: SchedulerConfig) -> Mapping[str, Pending]:
        """The parked jobs that need not be tried in a cycle starting from `state` (nothing
        they could use appeared since they were tried)."""
        if (
            not self.jobs
            or config != self.config
            or tuple(state.quota.queues.values()) != self.queues
            or _clusters(state) != self.clusters
            or frozenset(state.preempting) != self.preempting
        ):
            return {}
        grown = self._grown(state)
        if grown is EVERYTHING:
            return {}
        moved = _moved(self.placements, state.placements)
        pools = {state.quota.pool(seen.queue) for seen in moved}
        takeable = [seen.priority for seen in moved if seen.preemptible or seen.elastic]
        lowest = min(takeable, default=None)
        return {
            job_id: pending
            for job_id, pending in self.jobs.items()
            if not _woken(self.wants[job_id], grown)
            and (lowest is None or pending.job.priority < lowest)
            and not (
                _governed(state, pending.job.queue) and state.quota.pool(pending.job.queue) in pools
            )
        }

    def _grown(self, state: State) -> Grown | None:
        """What each node offers more of since the jobs were parked (EVERYTHING: the nodes
        themselves changed)."""
        grown: set[str] = set()
        for cluster in state.clusters.values():
            was = self.rooms[cluster.name]
            if len(was) != len(cluster.nodes):
                return EVERYTHING
            for node, before in zip(cluster.nodes, was, strict=True):
                if not _no_more(node, before):
                    grown.add("")
                    grown.update(node.devices)
        return frozenset(grown)


def park(state: State, config: SchedulerConfig, settled: Iterable[Pending]) -> Parked | None:
    """What a cycle leaves parked: of the `settled` pending jobs (nothing changed after their
    turn), those that may be parked, with the cycle's final `state`."""
    if config.priority_aging_s > 0:  # a waiting job's priority grows: it may preempt later
        return None
    jobs = {
        p.job.id: p
        for p in settled
        if p.job.id not in state.held and not _may_reserve(p.job, config)
    }
    if not jobs:
        return None
    return Parked(
        jobs=jobs,
        wants={job_id: asks(p.job) for job_id, p in jobs.items()},
        config=config,
        queues=tuple(state.quota.queues.values()),
        clusters=_clusters(state),
        rooms={c.name: tuple(_room(n) for n in c.nodes) for c in state.clusters.values()},
        placements=dict(state.placements),
        preempting=frozenset(state.preempting),
    )


def _woken(wants: Asks, grown: Grown) -> bool:
    """Whether what grew is room a job asking `wants` could use (any, for a task without
    accelerators)."""
    return bool(grown) if wants is None else bool(grown & wants)


def _governed(state: State, queue: str) -> bool:
    """Whether a job of `queue` may wait for quota or reclaim it (the queue has a quota)."""
    q = state.quota.queues.get(queue)
    return q is None or bool(q.quota)


def _may_reserve(job: Job, config: SchedulerConfig) -> bool:
    """Whether `job` is a gang large enough for a reservation (backfill), whatever it waited."""
    if not config.backfill or not job.gang:
        return False
    first = next(iter(assignments(job, config)), None)
    return first is not None and large_gang(job, first, config)


def _room(node: NodeState) -> NodeRoom:
    return (
        node.node,
        node.cpu_free,
        node.memory_free,
        node.pods_free,
        dict(node.devices),
    )


def _no_more(node: NodeState, before: NodeRoom) -> bool:
    """Whether `node` offers nothing it did not offer `before` (static facts the same)."""
    was, cpu, memory, pods, devices = before
    if node.cpu_free > cpu or node.memory_free > memory or node.pods_free > pods:
        return False
    if node.devices.keys() != devices.keys():
        return False
    if node.node is not was and static_facts(node.node) != static_facts(was):
        return False
    return all(_no_more_devices(d, devices[m]) for m, d in node.devices.items())


def _no_more_devices(now: NodeDevices, before: NodeDevices) -> bool:
    """Each device as used and as unhealthy as before at least (its load only orders)."""
    if now is before:
        return True
    return all(
        (ok <= was_ok and milli >= was_milli and memory >= was_memory and shares >= was_shares)
        for ok, was_ok, milli, was_milli, memory, was_memory, shares, was_shares in zip(
            now.healthy,
            before.healthy,
            now.used_milli,
            before.used_milli,
            now.used_memory_mib,
            before.used_memory_mib,
            now.shares,
            before.shares,
            strict=True,
        )
    )


def _clusters(state: State) -> tuple[Hashable, ...]:
    return tuple(_facts(c) for c in state.clusters.values())


def _facts(cluster: ClusterState) -> Hashable:
    c = cluster.cluster
    return (
        c.name,
        c.region,
        c.zone,
        tuple(sorted(c.labels.items())),
        c.ready,
        c.cordoned,
        c.accepted,
    )


def _moved(before: Mapping[str, Placement], now: Mapping[str, Placement]) -> list[Seen]:
    """What the victim search and quota see of the placements that came, went or changed
    (both sides of a change). Placements a cycle did not touch are the same objects."""
    moved = []
    for job_id, p in now.items():
        was = before.get(job_id)
        if was is p:
            continue
        seen = _seen(p)
        if was is None:
            moved.append(seen)
        elif (old := _seen(was)) != seen:
            moved += (old, seen)
    moved += (_seen(was) for job_id, was in before.items() if job_id not in now)
    return moved


def _seen(p: Placement) -> Seen:
    return Seen(
        p.job.id,
        p.job.priority,
        p.job.preemptible,
        p.job.queue,
        any(t.elastic is not None for t in p.job.tasks),
        p.cluster,
        p.flavors,
        p.replicas,
        tuple((t.cpu_milli, t.memory_mib, t.replicas, t.elastic) for t in p.job.tasks),
    )
