"""Score: spread load over clusters."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.measures import utilization_after


class Balance:
    """Prefer the cluster whose flavors stay least used after placement (opposite of packing)."""

    name = "balance"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        return [100.0 * (1.0 - utilization_after(ctx, c)) for c in candidates]
