"""Score: after a gang failed to start in a cluster, prefer the other clusters that fit."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext


class Retry:
    """0 for clusters where the job's gang recently failed to start, 100 elsewhere.

    Weighted high by default, so a re-planned job goes to another cluster when one fits, and
    back to the same one only when none other does.
    """

    name = "retry"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        avoided = ctx.job.constraints.avoided_clusters
        return [0.0 if c.cluster.name in avoided else 100.0 for c in candidates]
