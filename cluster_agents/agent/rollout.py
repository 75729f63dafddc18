"""A service shard's rolling update: which replicas get a pod of the current template
generation now, and which pods of older generations stay (pure).

Like a Deployment with `maxSurge: 1, maxUnavailable: 0`: a replica whose pods all run an
older generation gets its replacement only while no other replica is between its old and new
pod, and its ready old pod stays until the replacement is Ready; a replica without a ready
pod is replaced at once (nothing ready is lost). So the replicas with a ready pod never get
fewer, and at most one replica has two pods at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from cluster_agents.agent.backend import PodStatus


@dataclass(frozen=True)
class Plan:
    """The replicas whose current-generation pod should exist (existing, or to create), and
    the older-generation pods to keep; every other pod of the placement goes."""

    current: frozenset[int]
    keep: frozenset[str]


def plan(generation: int, replicas: int, pods: Iterable[PodStatus]) -> Plan:
    """The next step for a shard that holds `replicas` replicas of one task at template
    `generation`, given its pods (those being deleted are ignored)."""
    by_replica: defaultdict[int, list[PodStatus]] = defaultdict(list)
    for pod in pods:
        if not pod.deleting and pod.replica < replicas:
            by_replica[pod.replica].append(pod)
    current: set[int] = set()
    keep: dict[int, str] = {}  # replica -> its ready old pod, kept until the new one is ready
    waiting: list[int] = []  # replicas with only a ready old pod, in need of a surge
    for replica in range(replicas):
        mine = by_replica.get(replica, [])
        new = next((p for p in mine if p.generation == generation), None)
        old = max(
            (p for p in mine if p.generation != generation and p.ready),
            key=lambda p: p.generation,
            default=None,
        )
        if new is None and old is not None:
            waiting.append(replica)
            keep[replica] = old.name
            continue
        current.add(replica)
        if new is not None and not new.ready and old is not None:
            keep[replica] = old.name
    surging = sorted(r for r in current if r in keep)
    for replica in surging[1:]:  # more than one surge (not of our making): undo the others
        current.discard(replica)
    if not surging and waiting:
        current.add(waiting[0])
    return Plan(frozenset(current), frozenset(keep.values()))
