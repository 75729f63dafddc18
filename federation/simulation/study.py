"""One seed of the paper's protocol, end to end: tune, shuffle, replay, discretize."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from federation.nodeplacement import Pool, make_policy, typical_workload
from federation.nodeplacement.fragmentation import FragModel
from federation.simulation.adapter import pod_request, pool_node, task_types
from federation.simulation.hub import Hub, split_round_robin
from federation.simulation.metrics import Curves, discretize
from federation.simulation.multicluster import TwoLevelPlacer
from federation.simulation.protocol import TUNE_RATIO, tune_workload
from federation.simulation.replay import Placement, Placer, replay
from federation.simulation.trace import TraceNode, TracePod


@dataclass(frozen=True)
class SeedRun:
    """The outcome of one seed."""

    policy: str
    seed: int
    clusters: int
    curves: Curves
    pods: int
    failed_pods: int
    runtime_s: float


def shuffled_nodes(nodes: Sequence[TraceNode], rng: np.random.Generator) -> list[TraceNode]:
    """Nodes in a seeded random order: the order in which ties are broken (as upstream)."""
    by_name = sorted(nodes, key=lambda n: n.name)
    return [by_name[i] for i in rng.permutation(len(by_name))]


def run_seed(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: str,
    seed: int,
    clusters: int = 1,
    ratio: float = TUNE_RATIO,
) -> SeedRun:
    """Replay one seed of `pods` on the GPU nodes of `nodes` under `policy`.

    With `clusters` > 1 the nodes are split into member clusters and every pod goes through a
    cluster choice first (`multicluster`).
    """
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    gpu_nodes = [n for n in nodes if n.gpu > 0]
    capacity = 1000 * sum(n.gpu for n in gpu_nodes)
    work = tune_workload(pods, capacity, rng, ratio)
    order = shuffled_nodes(gpu_nodes, rng)
    pool = Pool([pool_node(n) for n in order])
    workload = typical_workload(task_types(pods))
    scorer = make_policy(policy, workload).bind(pool, rng)
    placer: Placement = Placer(pool, scorer)
    if clusters > 1:
        member = split_round_robin(gpu_nodes, clusters)
        placer = TwoLevelPlacer(Hub(pool, scorer, np.array([member[n.name] for n in order])))
    requests = [pod_request(p) for p in work]
    outcome = replay(pool, placer, requests, FragModel(workload, pool.model_names))
    return SeedRun(
        policy=policy,
        seed=seed,
        clusters=clusters,
        curves=discretize(outcome.trajectory),
        pods=len(work),
        failed_pods=outcome.failed_pods,
        runtime_s=time.perf_counter() - start,
    )
