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
        """SUCCESS when the queue may take the job's demand now (the same in every cluster,
        so it is worked out once per job and quota state)."""
        ledger = ctx.state.quota
        key = (ctx.key(assignment), ledger.version)
        status = ctx.quota.get(key)
        if status is None:
            status = ctx.quota[key] = ledger.check(ctx.job.queue, ctx.demand(assignment))
        return status
