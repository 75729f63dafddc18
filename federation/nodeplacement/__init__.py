"""Node-level placement policies: pure scorers over a vectorized pool of nodes.

The same policies serve the trace simulator, the cluster extender's prioritize (level 2) and
the hub's node-level estimates. See `docs/simulator.md` for what each policy does.
"""

from federation.nodeplacement.base import NodeScores, Policy, Scorer, normalized, select
from federation.nodeplacement.baselines import (
    BestFitPolicy,
    ClusteringPolicy,
    DotProdPolicy,
    PackingPolicy,
    RandomPolicy,
)
from federation.nodeplacement.fgd import FGDPolicy, SuanpanPolicy
from federation.nodeplacement.fragmentation import FragModel, FragTracker
from federation.nodeplacement.pool import PodRequest, Pool, PoolNode
from federation.nodeplacement.workload import (
    TargetWorkload,
    TaskType,
    task_type,
    typical_workload,
)

POLICY_NAMES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd", "suanpan")
DEFAULT_POLICY = "suanpan"


def make_policy(name: str, workload: TargetWorkload) -> Policy:
    """The policy called `name` (one of `POLICY_NAMES`); `workload` feeds FGD and Suanpan."""
    simple: dict[str, Policy] = {
        "random": RandomPolicy(),
        "dotprod": DotProdPolicy(),
        "clustering": ClusteringPolicy(),
        "packing": PackingPolicy(),
        "bestfit": BestFitPolicy(),
    }
    if name in simple:
        return simple[name]
    if name == "fgd":
        return FGDPolicy(workload)
    if name == "suanpan":
        return SuanpanPolicy(workload)
    raise ValueError(f"unknown placement policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


__all__ = [
    "DEFAULT_POLICY",
    "POLICY_NAMES",
    "BestFitPolicy",
    "ClusteringPolicy",
    "DotProdPolicy",
    "FGDPolicy",
    "FragModel",
    "FragTracker",
    "NodeScores",
    "PackingPolicy",
    "PodRequest",
    "Policy",
    "Pool",
    "PoolNode",
    "RandomPolicy",
    "Scorer",
    "SuanpanPolicy",
    "TargetWorkload",
    "TaskType",
    "make_policy",
    "normalized",
    "select",
    "task_type",
    "typical_workload",
]
