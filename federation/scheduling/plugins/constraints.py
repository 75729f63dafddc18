"""Cluster filter: the job's region, cluster and cluster-label constraints."""

from __future__ import annotations

from federation.scheduling.framework import JobContext
from federation.scheduling.state import ClusterState
from federation.scheduling.status import SUCCESS, Status, unresolvable


class Constraints:
    """Unresolvable where the job may not run: other region, other cluster, labels missing."""

    name = "constraints"

    def filter(self, ctx: JobContext, cluster: ClusterState) -> Status:
        """SUCCESS when the cluster satisfies every constraint of the job."""
        wanted = ctx.job.constraints
        facts = cluster.cluster
        if wanted.regions and facts.region not in wanted.regions:
            return unresolvable(f"region {facts.region!r} not in {sorted(wanted.regions)}")
        if wanted.clusters and facts.name not in wanted.clusters:
            return unresolvable(f"cluster not in {sorted(wanted.clusters)}")
        for key, value in sorted(wanted.cluster_selector.items()):
            if facts.labels.get(key) != value:
                return unresolvable(f"cluster label {key}={value} missing")
        return SUCCESS
