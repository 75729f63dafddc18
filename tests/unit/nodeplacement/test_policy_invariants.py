"""Every policy, replayed over random pools and arrivals, never over-allocates a node."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.nodeplacement import (
    POLICY_NAMES,
    PodRequest,
    Pool,
    PoolNode,
    TargetWorkload,
    TaskType,
    make_policy,
    task_type,
    typical_workload,
)
from federation.scheduling.devices import WHOLE
from federation.simulation.replay import Placer
from tests.unit.nodeplacement.test_pool_fit import node_devices, requests


@st.composite
def pools(draw: st.DrawFn) -> list[PoolNode]:
    nodes = []
    for k in range(draw(st.integers(1, 4))):
        cpu, memory = draw(st.integers(0, 32_000)), draw(st.integers(0, 32_000))
        devices = draw(st.none() | node_devices())
        nodes.append(PoolNode(f"n{k}", cpu, memory, devices))
    return nodes


CPU_ONLY = st.builds(PodRequest, st.integers(0, 16_000), st.integers(0, 16_000))


@settings(max_examples=40, deadline=None)
@given(
    nodes=pools(),
    arrivals=st.lists(requests() | CPU_ONLY, min_size=1, max_size=12),
    policy=st.sampled_from(POLICY_NAMES),
    seed=st.integers(0, 3),
)
def test_no_policy_over_allocates_a_node(
    nodes: list[PoolNode], arrivals: list[PodRequest], policy: str, seed: int
) -> None:
    pool = Pool(nodes)
    workload = typical_workload([task_type(r) for r in arrivals])
    placer = Placer(pool, make_policy(policy, workload).bind(pool, np.random.default_rng(seed)))
    for req in arrivals:
        fits = bool(pool.feasible(req).any())
        where = placer.place(req)
        assert (where is not None) == fits  # a pod fails only where no node can take it
        assert (pool.cpu_free >= 0).all() and (pool.mem_free >= 0).all()
        assert (pool.used_milli <= WHOLE).all() and (pool.used_mem <= pool.dev_mem).all()


@settings(max_examples=40, deadline=None)
@given(nodes=pools(), arrivals=st.lists(requests(), max_size=8), req=CPU_ONLY)
def test_under_a_cpu_short_workload_suanpan_scores_cpu_only_pods_as_fgd_does(
    nodes: list[PoolNode], arrivals: list[PodRequest], req: PodRequest
) -> None:
    """When CPU is short, only device pods count CPU fragmentation; a CPU-only pod's place is
    FGD's (no pool has the CPU this workload asks at full devices)."""
    pool = Pool(nodes)
    workload = TargetWorkload((TaskType(10**9, 1000, 1), TaskType(1000, 0, 0)), (0.5, 0.5))
    placer = Placer(pool, make_policy("suanpan", workload).bind(pool, np.random.default_rng(0)))
    for r in arrivals:
        placer.place(r)
    feasible = pool.feasible(req)
    scores = [
        make_policy(name, workload).bind(pool, np.random.default_rng(0)).score(req, feasible)
        for name in ("suanpan", "fgd")
    ]
    assert np.array_equal(scores[0].values, scores[1].values)
