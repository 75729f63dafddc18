"""Flavor choice: which accelerator option each task runs with in a given cluster.

Per task the user lists acceptable flavors in order of preference. The assigner tries the
combinations (one option per task) in that order, or fastest first, and takes the first one
that passes every filter; the result is the chosen (cluster, flavor per task) pair with its
per-replica estimate. Victim search asks the same question on a trial state through the
`FitCheck` protocol, so flavor choice and victim choice always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice, product
from typing import Protocol

from federation.scheduling.framework import Estimate, JobContext, Profile, SchedulerConfig
from federation.scheduling.measures import relative_speed
from federation.scheduling.model import Assignment, FlavorOption, Job
from federation.scheduling.state import ClusterState
from federation.scheduling.status import SUCCESS, Code, Status


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a job fits a cluster now and, if so, with which flavors and where."""

    status: Status
    assignment: Assignment | None = None
    estimate: Estimate | None = None


class FitCheck(Protocol):
    """Does the job fit this cluster in its current (possibly trial) state?"""

    def __call__(self, ctx: JobContext, cluster: ClusterState) -> Verdict:
        """The first fitting assignment, or the most useful reason why none fits."""
        ...


def assignments(job: Job, config: SchedulerConfig) -> list[Assignment]:
    """The flavor combinations to try, best first, at most `config.max_assignments`."""
    per_task: list[tuple[FlavorOption | None, ...]] = [
        task.accelerators.options if task.accelerators is not None else (None,)
        for task in job.tasks
    ]
    combos = list(islice(product(*per_task), config.max_assignments))
    if config.flavor_order == "fastest":
        combos.sort(key=lambda a: -relative_speed(job, a))
    return combos


class FlavorAssigner:
    """The `FitCheck` of a profile: cluster filters, then each assignment through the
    assignment filters until one passes."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    def __call__(self, ctx: JobContext, cluster: ClusterState) -> Verdict:
        """The first assignment that passes, or the reason of the most preferred one that
        preemption could help (else of the most preferred one)."""
        for cluster_filter in self.profile.cluster_filters:
            status = cluster_filter.filter(ctx, cluster)
            if not status.ok:
                return Verdict(status.by(cluster_filter.name))
        first: Status | None = None
        first_unschedulable: Status | None = None
        for assignment in ctx.assignments:
            status = self._check(ctx, cluster, assignment)
            if status.ok:
                return Verdict(status, assignment, ctx.estimates.get((cluster.name, assignment)))
            first = first or status
            if status.code is Code.UNSCHEDULABLE and first_unschedulable is None:
                first_unschedulable = status
        return Verdict(first_unschedulable or first or Status(Code.UNRESOLVABLE, "no flavor"))

    def _check(self, ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
        for assignment_filter in self.profile.assignment_filters:
            status = assignment_filter.filter(ctx, cluster, assignment)
            if not status.ok:
                return status.by(assignment_filter.name)
        return SUCCESS
