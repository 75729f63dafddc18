"""Cluster filter: the cluster is accepted, ready, not cordoned, and has ready nodes."""

from __future__ import annotations

from federation.scheduling.framework import JobContext
from federation.scheduling.state import ClusterState
from federation.scheduling.status import SUCCESS, Status, unschedulable


class Ready:
    """Unschedulable while a cluster is not accepted, not ready, cordoned or without ready
    nodes."""

    name = "ready"

    def filter(self, ctx: JobContext, cluster: ClusterState) -> Status:
        """SUCCESS when the cluster takes new work now."""
        if not cluster.cluster.accepted:
            return unschedulable("cluster not accepted (suanpan cluster accept)")
        if not cluster.cluster.ready:
            return unschedulable("cluster not ready")
        if cluster.cluster.cordoned:
            return unschedulable("cluster cordoned")
        if not cluster.ready_nodes:
            return unschedulable(f"0/{len(cluster.nodes)} nodes ready")
        return SUCCESS
