"""Assignment filter: the queue's quota, with cohort borrowing."""

from __future__ import annotations

from federation.scheduling.framework import JobContext
from federation.scheduling.model import Assignment
from federation.scheduling.state import ClusterState
from federation.scheduling.status import Status


class Quota:
    """The job's demand fits its queue's nominal quota plus what the cohort may lend."""

    name = "quota"

    def filter(self, ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
        """SUCCESS when the queue may take the job's demand now."""
        return ctx.state.quota.check(ctx.job.queue, ctx.demand(assignment))
