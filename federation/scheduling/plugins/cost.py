"""Score: the cheaper cluster, from a per-cluster price label."""

from __future__ import annotations

from collections.abc import Sequence

from federation.scheduling.devices import WHOLE
from federation.scheduling.framework import Candidate, JobContext

UNPRICED = 50.0  # score of a cluster without a (valid) price label


class Cost:
    """100 for the cheapest priced candidate, proportionally less for dearer ones (price per
    device-hour from the label `SchedulerConfig.price_label`, times the job's devices)."""

    name = "cost"

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """0..100 per candidate."""
        costs = [self._cost(ctx, c) for c in candidates]
        priced = [c for c in costs if c is not None]
        cheapest = min(priced, default=0.0)
        return [
            UNPRICED if c is None else (100.0 if c <= 0 else 100.0 * cheapest / c) for c in costs
        ]

    @staticmethod
    def _cost(ctx: JobContext, candidate: Candidate) -> float | None:
        label = candidate.cluster.cluster.labels.get(ctx.config.price_label)
        try:
            price = float(label) if label is not None else None
        except ValueError:
            return None
        if price is None or price < 0:
            return None
        devices = sum(
            task.replicas * option.milli_devices / WHOLE
            for task, option in zip(ctx.job.tasks, candidate.assignment, strict=True)
            if option is not None
        )
        return price * max(devices, 1.0)
