"""Score: prefer the cluster whose devices of the job's flavors are least busy right now."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.state import ClusterState


class LiveLoad:
    """100 minus the mean live utilization (percent, as the devices' exporters report it) of
    the cluster's devices of the candidate's flavors, busy or not: allocation alone misleads
    where shares and services leave devices idle or run them hot. A candidate with no readings
    gets the mean score of those with some (no telemetry anywhere: all equal)."""

    name = "live_load"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        found = [
            _load(c.cluster, frozenset(o.flavor for o in c.assignment if o is not None))
            for c in candidates
        ]
        known = [100.0 - load for load in found if load is not None]
        neutral = fmean(known) if known else 50.0
        return [neutral if load is None else 100.0 - load for load in found]


def _load(cluster: ClusterState, flavors: frozenset[str]) -> float | None:
    """Mean reported utilization of the cluster's devices of `flavors` (None: none reported),
    worked out once per snapshot of the cluster (readings are usage: they change between
    snapshots whose static facts do not, so the static cache keeps them with their snapshot)."""
    seen, means = cluster.static_cache.get("live_load", (None, {}))
    if seen is not cluster.cluster:
        means = {}
        cluster.static_cache["live_load"] = (cluster.cluster, means)
    if flavors not in means:
        readings = [
            load
            for node in cluster.cluster.nodes
            for devices in node.devices
            if devices.model in flavors
            for load in devices.load
            if load is not None
        ]
        means[flavors] = fmean(readings) if readings else None
    found: float | None = means[flavors]
    return found
