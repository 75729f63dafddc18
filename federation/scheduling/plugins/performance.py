"""Score: performance-normalized speed of the chosen flavors."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.measures import relative_speed


class Performance:
    """Prefer the assignment whose devices are fastest, relative to the fastest option of each
    task (100: every task got its fastest acceptable flavor)."""

    name = "performance"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        return [100.0 * relative_speed(ctx.job, c.assignment) for c in candidates]
