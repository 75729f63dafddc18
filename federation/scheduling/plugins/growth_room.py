"""Score: room for an elastic job to grow where it starts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from federation.scheduling.devices import WHOLE
from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.model import CPU, FlavorOption, Task


class GrowthRoom:
    """Prefer, for an elastic job, the cluster with the most room for the replicas it may add.

    An elastic job never leaves the cluster it starts in, and it grows only into capacity
    there, so the cluster chosen for its first `min` replicas decides how far it can grow:
    packing alone would stack every elastic job into the fullest cluster. The score is the
    share of the growth to `max` (devices of the chosen flavors, CPU for tasks without
    accelerators) that fits in what the cluster has free once the job is placed, less what
    the elastic jobs already there may still grow by (elastic jobs placed in one cycle would
    otherwise all see the same empty cluster). Jobs that cannot grow score 0 everywhere, so
    their ranking is untouched.
    """

    name = "growth_room"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        if not ctx.job.elastic:
            return [0.0] * len(candidates)
        return [100.0 * _room(ctx, c) for c in candidates]


def _growth(tasks: Iterable[Task], options: Iterable[FlavorOption | None]) -> dict[str, int]:
    """What tasks may still grow by: flavor ("" for CPU) -> milli-devices or milli-CPU."""
    out: dict[str, int] = {}
    for task, option in zip(tasks, options, strict=True):
        extra = task.ceiling - task.replicas
        if extra > 0:
            key = option.flavor if option is not None else ""
            per_replica = option.milli_devices if option is not None else task.cpu_milli
            out[key] = out.get(key, 0) + extra * per_replica
    return out


def _room(ctx: JobContext, candidate: Candidate) -> float:
    """The share (0..1) of the job's possible growth that fits in the candidate's free room."""
    cluster = candidate.cluster
    wanted = _growth(ctx.job.tasks, candidate.assignment)
    if not wanted:
        return 0.0
    demand = ctx.demand(candidate.assignment)
    pledged: dict[str, int] = {}
    for placed in ctx.state.elastic.values():
        if placed.cluster == cluster.name:
            options = [placed.option(t) for t in range(len(placed.job.tasks))]
            for key, amount in _growth(placed.job.tasks, options).items():
                pledged[key] = pledged.get(key, 0) + amount
    fits = 0.0
    for key, need in wanted.items():
        if key:
            index = cluster.flavors.get(key)
            free = 0 if index is None else index.total * WHOLE - index.used_milli
        else:
            free = cluster.cpu_free
        free -= demand.get(key or CPU, 0) + pledged.get(key, 0)
        fits += min(max(free, 0), need)
    return fits / sum(wanted.values())
