"""The relaxation floor on instances small enough to solve by hand."""

from __future__ import annotations

import numpy as np
import pytest

from federation.simulation.floor import (
    POINT_EDGE_PCT,
    arrived,
    relaxation_floor,
    share_patterns,
)
from federation.simulation.metrics import Trajectory, discretize
from federation.simulation.trace import TraceNode, TracePod


def node(name: str, gpus: int, model: str = "T4", cpu: int = 32_000) -> TraceNode:
    return TraceNode(name, cpu, 131_072, gpus, model)


def pod(name: str, count: int, milli: int, cpu: int = 1000, spec: tuple[str, ...] = ()) -> TracePod:
    return TracePod(name, cpu, 1024, count, milli if count else 0, spec)


def test_patterns_are_the_maximal_fillings_of_one_gpu() -> None:
    assert share_patterns([600, 300]) == [(1, 1), (0, 3)]
    assert share_patterns([810, 190, 470]) == [(1, 0, 1), (0, 2, 0), (0, 1, 2), (0, 0, 5)]
    assert share_patterns([]) == []


def test_two_large_shares_cannot_share_one_gpu() -> None:
    # the assignment LP would put 1.2 GPUs of demand on 1 GPU and report 0 %
    floor = relaxation_floor([node("n", 1)], [pod("a", 1, 600), pod("b", 1, 600)])
    assert floor.allocated_milli == pytest.approx(600)
    assert floor.unallocated_pct == pytest.approx(40.0)


def test_slivers_are_filled_by_small_shares() -> None:
    pods = [pod("a", 1, 810), pod("b", 1, 810), pod("c", 1, 190), pod("d", 1, 190)]
    floor = relaxation_floor([node("n", 2)], pods)
    assert floor.unallocated_pct == pytest.approx(0.0, abs=1e-9)


def test_cpu_models_and_node_size_bound_what_fits() -> None:
    nodes = [node("small", 2, cpu=4000), node("v100", 4, "V100M16")]
    pods = [
        pod("cpu-heavy", 1, 1000, cpu=8000),  # fits only the V100 node
        pod("t4-only", 1, 1000, spec=("T4",)),  # fits only the small node
        pod("eight", 8, 1000),  # fits no node
        pod("four", 4, 1000),  # the V100 node, whole
        pod("cpu-only", 0, 0, cpu=100_000),  # allocates no GPU, never needed
    ]
    floor = relaxation_floor(nodes, pods)
    # the V100 node holds either "four" or "cpu-heavy" (+3 GPUs left idle): best is four (4 GPUs)
    assert floor.allocated_milli == pytest.approx(5000)
    assert floor.unallocated_pct == pytest.approx(100 * 1 / 6)


def test_arrived_is_the_prefix_within_the_capacity() -> None:
    work = [pod("a", 1, 500), pod("b", 2, 1000), pod("c", 0, 0), pod("d", 1, 600)]
    assert [p.name for p in arrived(work, 3000)] == ["a", "b", "c"]
    assert [p.name for p in arrived(work, 3000, pct=10)] == []


def test_the_floor_bounds_every_arrival_the_x100_point_averages() -> None:
    # 10 GPUs; the 0.99 share asks more CPU than the node has and fails at 99.9 % arrived;
    # the 0.04 share arrives at 100.3 %: both arrivals round to the x = 100 point
    work = [pod(f"w{i}", 1, 1000) for i in range(9)]
    work += [pod("big-cpu", 1, 990, cpu=64_000), pod("small", 1, 40)]
    nodes = [node("n", 10)]
    trajectory = Trajectory(
        total_milli=10_000,
        arrived_milli=np.cumsum([p.total_gpu_milli for p in work]),
        used_milli=np.array([1000 * (i + 1) for i in range(9)] + [9000, 9040]),
        frag_milli=np.zeros(len(work)),
    )
    point = discretize(trajectory).unallocated_pct[100]
    assert point == pytest.approx(9.8)  # the mean of 10 % and 9.6 %
    within_capacity = relaxation_floor(nodes, arrived(work, 10_000))
    assert within_capacity.unallocated_pct == pytest.approx(10.0)  # above the point: no floor
    edge = relaxation_floor(nodes, arrived(work, 10_000, POINT_EDGE_PCT))
    assert edge.unallocated_pct == pytest.approx(9.6)
    assert edge.unallocated_pct <= point
