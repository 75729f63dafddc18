"""Fragmentation of a node against a target workload, worked out by hand."""

from __future__ import annotations

import numpy as np

from federation.nodeplacement import (
    FragModel,
    FragTracker,
    TargetWorkload,
    TaskType,
    typical_workload,
)
from tests.unit.nodeplacement.builders import gpu_node, gpus, pool_of

WORKLOAD = TargetWorkload(
    (
        TaskType(1000, 500, 1),  # a half-GPU share
        TaskType(1000, 1000, 2),  # two whole GPUs
        TaskType(4000, 0, 0),  # CPU only: every free GPU is a fragment to it
        TaskType(1000, 1000, 1, ("A10",)),  # only A10 nodes
    ),
    (0.4, 0.3, 0.2, 0.1),
)


def frag_of(*used: int, cpu_free: int = 32_000) -> float:
    model = FragModel(WORKLOAD, ["A10", "T4"])
    free = np.array([[1000 - u for u in used]])
    return float(model.frag(np.array([cpu_free]), free, np.array([1]))[0])  # a T4 node


def test_node_fragmentation_by_task_type() -> None:
    # free: 700 + 200 + 1000 = 1900 milli
    # share 500: can run; the 200 piece is too small -> 200
    # two GPUs: only one whole GPU -> all 1900
    # CPU-only: 1900; A10-only on a T4 node: 1900
    expected = 0.4 * 200 + 0.3 * 1900 + 0.2 * 1900 + 0.1 * 1900
    assert abs(frag_of(300, 800, 0) - expected) < 1e-9


def test_lack_of_cpu_makes_every_free_gpu_a_fragment() -> None:
    assert abs(frag_of(0, 0, cpu_free=500) - 2000) < 1e-9


def test_a_full_node_has_no_fragments() -> None:
    assert frag_of(1000, 1000) == 0


def test_tracker_recomputes_only_changed_nodes() -> None:
    pool = pool_of(gpu_node("a", (0, 0)), gpu_node("b", (0, 0)))
    tracker = FragTracker(pool, FragModel(WORKLOAD, pool.model_names))
    before = tracker.current().copy()
    pool.place(0, gpus(milli=300), (0,))
    after = tracker.current()
    assert after[1] == before[1] and after[0] > before[0]


def test_typical_workload_keeps_the_popular_types_and_renormalizes() -> None:
    a, b, c = TaskType(1000, 500, 1), TaskType(1000, 1000, 1), TaskType(2000, 0, 0)
    workload = typical_workload([a] * 60 + [b] * 36 + [c] * 4, threshold=0.95)
    assert workload.types == (a, b)
    assert np.isclose(sum(workload.weights), 1.0) and np.isclose(workload.weights[0], 60 / 96)
    assert typical_workload([]).types == ()
