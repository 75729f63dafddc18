"""Measures of a candidate placement that several plugins and the flavor assigner share:
the cluster load it would leave (packing, balance) and the relative speed of its flavors."""

from __future__ import annotations

from federation.scheduling.devices import WHOLE
from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.model import Assignment, Job


def utilization_after(ctx: JobContext, candidate: Candidate) -> float:
    """Used fraction (0..1) of the job's flavors in the cluster once the job is placed there;
    CPU for a job without accelerators."""
    cluster = candidate.cluster
    flavors = {o.flavor for o in candidate.assignment if o is not None}
    if not flavors:
        total = cluster.cpu_total
        used = cluster.cpu_total - cluster.cpu_free
        adding = sum(t.replicas * t.cpu_milli for t in ctx.job.tasks)
    else:
        total = sum(cluster.flavors[f].total * WHOLE for f in flavors)
        used = sum(cluster.flavors[f].used_milli for f in flavors)
        adding = sum(ctx.demand(candidate.assignment).get(f, 0) for f in flavors)
    return min((used + adding) / total, 1.0) if total else 1.0


def relative_speed(job: Job, assignment: Assignment) -> float:
    """Device-weighted speed of `assignment` over the best each task could get (0..1)."""
    got = best = 0.0
    for task, option in zip(job.tasks, assignment, strict=True):
        if option is None or task.accelerators is None:
            continue
        fastest = max(o.speed * o.milli_devices for o in task.accelerators.options)
        got += task.replicas * option.speed * option.milli_devices
        best += task.replicas * fastest
    return got / best if best else 1.0
