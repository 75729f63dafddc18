"""Score: performance-normalized speed of the chosen flavors."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.model import Assignment, Job


class Performance:
    """Prefer the assignment whose devices are fastest, relative to the fastest option of each
    task (100: every task got its fastest acceptable flavor)."""

    name = "performance"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        return [100.0 * relative_speed(ctx.job, c.assignment) for c in candidates]


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
