"""Multi-cluster replay: every pod goes through the real core (level 1), then the node policy.

Split: nodes are ordered by (model, devices, CPU, name) and dealt round-robin, so every member
cluster gets a similar mix of models and node sizes (like K data centers of one fleet).

Level 1 is `federation.scheduling.schedule()` with the hub's default scores and no preemption
(pods never leave in the paper's protocol): one cycle per arriving pod, on a snapshot of the
pool. Level 2 is the node policy inside the cluster the core chose (`hub.Hub.bind`).
"""

from __future__ import annotations

from dataclasses import replace

from federation.nodeplacement import PodRequest
from federation.scheduling import DEFAULT_CONFIG, SchedulerConfig
from federation.simulation.hub import Hub, PodJob, Where

STATIC_CONFIG: SchedulerConfig = replace(DEFAULT_CONFIG, preemption=False)


class TwoLevelPlacer:
    """Level 1 (the core) picks a member cluster, level 2 (the node policy) a node inside it."""

    def __init__(self, hub: Hub, config: SchedulerConfig = STATIC_CONFIG) -> None:
        self.hub = hub
        self.config = config
        self.arrived = 0

    def place(self, req: PodRequest) -> Where | None:
        """Place `req` where the core and then the node policy choose; None when nothing fits."""
        self.arrived += 1
        job = self.hub.job(PodJob(str(self.arrived)), req)
        result = self.hub.cycle((job,), self.config)
        if not result.placed:
            return None
        return self.hub.bind(result.placed[0].placement.cluster, req)
