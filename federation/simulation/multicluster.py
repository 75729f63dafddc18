"""Multi-cluster replay: split the nodes into K member clusters, choose a cluster, then a node.

Split: nodes are ordered by (model, devices, CPU, name) and dealt round-robin, so every member
cluster gets a similar mix of models and node sizes (like K data centers of one fleet).

Level 1 (the hub) sees each cluster's node-level free capacity and rates every cluster where the
pod fits with the formula of the core's `packing` score plugin
(`federation.scheduling.plugins.packing`): 50 x the utilization of the pod's device models in
the cluster once the pod is there, plus 50 if the node the pod would take there was already
partly used (0 if it breaks an intact node). The highest rating wins, ties go to the lower
cluster index. Level 2 (the cluster's extender) places the pod with the node policy inside the
chosen cluster only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from federation.scheduling.devices import WHOLE
from federation.scheduling.placement import PodRequest, Pool, Scorer, select
from federation.scheduling.placement.base import NodeScores
from federation.scheduling.placement.pool import BoolArray, IntArray
from federation.simulation.replay import Placed
from federation.simulation.trace import TraceNode


def split_round_robin(nodes: Sequence[TraceNode], k: int) -> dict[str, int]:
    """Member cluster of every node name: round-robin over nodes sorted by model and size."""
    ordered = sorted(nodes, key=lambda n: (n.model, n.gpu, n.cpu_milli, n.name))
    return {n.name: i % k for i, n in enumerate(ordered)}


class TwoLevelPlacer:
    """Level 1 picks a member cluster, level 2 a node inside it (same node policy)."""

    def __init__(self, pool: Pool, scorer: Scorer, cluster_of: IntArray) -> None:
        self.pool = pool
        self.scorer = scorer
        self.cluster_of = cluster_of
        self.clusters = int(cluster_of.max(initial=-1)) + 1

    def place(self, req: PodRequest) -> Placed | None:
        """Place `req` in the best-rated cluster; None when it fits in no cluster."""
        feasible = self.pool.feasible(req)
        if not feasible.any():
            return None
        scores = self.scorer.score(req, feasible)
        best, best_rating = None, -np.inf
        for c in range(self.clusters):
            inside = self.cluster_of == c
            i = select(NodeScores(np.where(inside, scores.values, -np.inf)))
            if i is not None and (rating := self.rating(req, inside, i)) > best_rating:
                best, best_rating = i, rating
        if best is None:
            return None
        chosen = scores.devices_for(self.pool, best, req)
        self.pool.place(best, req, chosen)
        return best, chosen

    def rating(self, req: PodRequest, inside: BoolArray, node: int) -> float:
        """The core's packing score for placing `req` on `node` of the cluster `inside`."""
        pool = self.pool
        if req.device is None:
            total = float(pool.cpu_cap[inside].sum())
            used = float((pool.cpu_cap - pool.cpu_free)[inside].sum()) + req.cpu_milli
        else:
            mine = inside & pool.model_allowed(req)
            total = float(pool.size[mine].sum() * WHOLE)
            used = float(pool.used_milli[mine].sum()) + req.gpu_milli
        utilization = min(used / total, 1.0) if total else 1.0
        intact = bool(pool.whole_free()[node].sum() == pool.size[node])
        return 50.0 * utilization + (0.0 if intact else 50.0)
