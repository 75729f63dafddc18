"""The FGD paper's workload protocol (upstream `TunePodsByNodeTotalResource` + `--shuffle-pod`).

Upstream order, reproduced here: the trace's pods are sorted by name and shuffled; then, if their
GPU demand is below `ratio` x the cluster's GPUs, clones drawn with replacement from the trace
(sorted by name) are appended until the next draw would pass the target (upstream compares the
draw's *per-GPU* milli, a quirk we keep); if the demand is above the target, random pods are
removed until it is not. One seeded generator drives the shuffle and the draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from federation.simulation.trace import TracePod

TUNE_RATIO = 1.3
PAPER_SEEDS = tuple(range(42, 52))


def tune_workload(
    pods: Sequence[TracePod],
    capacity_milli: int,
    rng: np.random.Generator,
    ratio: float = TUNE_RATIO,
) -> list[TracePod]:
    """The arrival sequence for one seed: shuffled trace pods tuned to `ratio` x capacity."""
    by_name = sorted(pods, key=lambda p: p.name)
    order = rng.permutation(len(by_name))
    workload = [by_name[i] for i in order]
    target = ratio * capacity_milli
    total = sum(p.total_gpu_milli for p in workload)
    if total > target:
        while total > target:
            total -= workload.pop(int(rng.integers(len(workload)))).total_gpu_milli
    elif total < target:
        while True:
            pod = by_name[int(rng.integers(len(by_name)))]
            if total + pod.gpu_milli > target:
                break
            total += pod.total_gpu_milli
            workload.append(pod)
    return workload
