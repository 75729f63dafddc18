"""Score: run near the queue's and tenant's other work, or in the regions the job prefers."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext

SAME_QUEUE = 100.0
SAME_TENANT = 60.0
REGION_STEP = 10.0  # each later preferred region scores this much less


class Locality:
    """100 where the job's queue already runs or in its first preferred region; 60 where its
    tenant runs; later preferred regions 10 less each; otherwise 0."""

    name = "locality"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        job = ctx.job
        preferred = job.constraints.preferred_regions
        scores = []
        for c in candidates:
            same_queue, same_tenant = ctx.state.runs_there(c.cluster.name, job.queue)
            score = 0.0
            if same_queue:
                score = SAME_QUEUE
            elif same_tenant:
                score = SAME_TENANT
            region = c.cluster.cluster.region
            if region in preferred:
                score = max(score, SAME_QUEUE - REGION_STEP * preferred.index(region))
            scores.append(score)
        return scores
