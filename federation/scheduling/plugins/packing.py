"""Score: fragmentation-aware packing at cluster level."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.framework import Candidate, JobContext
from federation.scheduling.measures import utilization_after


class Packing:
    """Prefer the fuller cluster and placements that leave whole nodes intact.

    Half the score is the flavor's utilization after placement, half the share of the nodes
    used that were already partly used (breaking a fully free node fragments the cluster).
    """

    name = "packing"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        scores = []
        for c in candidates:
            kept = 1.0
            if c.estimate is not None and c.estimate.nodes:
                kept = 1.0 - c.estimate.intact_nodes_broken / c.estimate.nodes
            scores.append(50.0 * utilization_after(ctx, c) + 50.0 * kept)
        return scores
