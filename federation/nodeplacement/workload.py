"""The target workload: the task types a pool expects and how popular each is (FGD's M).

A task type is what fragmentation is measured against: CPU, the per-device share, the device
count and the accepted models. `typical_workload` keeps the most popular types covering
`threshold` of the tasks (upstream `GetTypicalPods`: popularity threshold 95 %, step 1, CPU-only
tasks included) and renormalizes their weights to sum to 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from federation.nodeplacement.pool import PodRequest

DEFAULT_CPU_MILLI = 100  # kube-scheduler's non-zero default for a pod that requests no CPU


@dataclass(frozen=True, slots=True, order=True)
class TaskType:
    """One task type: CPU, per-device milli (0: no device), device count, accepted models."""

    cpu_milli: int
    milli: int
    count: int
    models: tuple[str, ...] = ()


def task_type(req: PodRequest) -> TaskType:
    """The task type of a request (CPU 0 counts as kube-scheduler's default 100m)."""
    dev = req.device
    return TaskType(
        cpu_milli=req.cpu_milli or DEFAULT_CPU_MILLI,
        milli=0 if dev is None else dev.milli,
        count=0 if dev is None else dev.count,
        models=tuple(sorted(req.models)),
    )


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Task types with weights that sum to 1."""

    types: tuple[TaskType, ...]
    weights: tuple[float, ...]


def typical_workload(tasks: Iterable[TaskType], threshold: float = 0.95) -> TargetWorkload:
    """The most popular task types that together cover `threshold` of `tasks`, renormalized.

    Types are ranked by count, ties by the type itself, largest first; types are added one at
    a time until the covered share reaches the threshold.
    """
    counts = Counter(tasks)
    total = sum(counts.values())
    if total == 0:
        return TargetWorkload((), ())
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], _rank_key(kv[0])), reverse=True)
    kept: list[tuple[TaskType, int]] = []
    covered = 0
    for item in ranked:
        if covered >= threshold * total:
            break
        kept.append(item)
        covered += item[1]
    return TargetWorkload(
        types=tuple(t for t, _ in kept), weights=tuple(c / covered for _, c in kept)
    )


def _rank_key(t: TaskType) -> tuple[int, int, int, str]:
    return (t.cpu_milli, t.milli, t.count, "|".join(t.models))
