"""The autoscaler of services: Kubernetes' Horizontal Pod Autoscaler rule over every cluster a
service runs in (pure; the service controller feeds it the shards' reports).

- A recommendation: average = metric summed over the replicas read / replicas read; ratio =
  average / target; within `tolerance` of 1 the service keeps its replicas; else
  ceil(ready x ratio). Ready replicas without a reading count as 0 when scaling up and as
  the target when scaling down (HPA's conservative rule), and when that brings the ratio
  within tolerance or turns the direction, the service keeps its replicas. No reading at all:
  no change.
- Stabilization: a scale-up takes the least recommendation of the last up-window, a
  scale-down the most of the last down-window; the history lives in memory (a new leader
  starts afresh, and scales down only once a whole down-window has passed: conservative).
- The result is clamped to [min, max].
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from federation.compiled import CompiledAutoscaling


@dataclass(frozen=True)
class Reading:
    """The scaling metric as the service's clusters report it: summed over `sampled` of its
    `ready` replicas."""

    ready: int
    sampled: int
    metric_sum: float


@dataclass(frozen=True)
class Recommendation:
    """A raw recommendation and why (for the `Scaled` event)."""

    replicas: int
    average: float | None  # None: no reading


def recommend(current: int, reading: Reading, rule: CompiledAutoscaling) -> Recommendation:
    """HPA's replica count for `reading` (see the module), before stabilization."""
    if reading.sampled <= 0 or reading.ready <= 0:
        return Recommendation(current, None)
    average = reading.metric_sum / reading.sampled
    ratio = average / rule.target
    if abs(ratio - 1.0) <= rule.tolerance:
        return Recommendation(current, average)
    missing = max(reading.ready - reading.sampled, 0)
    if missing:
        assumed = 0.0 if ratio > 1.0 else rule.target
        conservative = (reading.metric_sum + missing * assumed) / (reading.ready * rule.target)
        if abs(conservative - 1.0) <= rule.tolerance or (conservative > 1.0) != (ratio > 1.0):
            return Recommendation(current, average)
        ratio = conservative
    return Recommendation(math.ceil(reading.ready * ratio - 1e-9), average)


@dataclass
class Recommendations:
    """One service's recent recommendations, for the stabilization windows."""

    since: float  # when the history began (a scale-down waits a whole window from it)
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def stabilized(
        self,
        now: float,
        recommendation: int,
        current: int,
        rule: CompiledAutoscaling,
        bounds: tuple[int, int],
    ) -> int:
        """Record `recommendation` at `now` and return the replicas to run: up to the least
        of the up-window, down to the most of the down-window, within `bounds`."""
        self.history.append((now, recommendation))
        keep = max(rule.up_window_s, rule.down_window_s)
        while self.history and self.history[0][0] < now - keep:
            self.history.popleft()
        up = min(r for t, r in self.history if t >= now - rule.up_window_s)
        down = max(r for t, r in self.history if t >= now - rule.down_window_s)
        if now - self.since < rule.down_window_s:  # a window not seen whole: no scale-down
            down = max(down, current)
        desired = current
        if desired < up:
            desired = up
        if desired > down:
            desired = down
        low, high = bounds
        return min(max(desired, low), high)
