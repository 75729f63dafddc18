"""The placement-policy interface: score every feasible node of a pool for one pod.

A `Policy` is bound to a `Pool` (and a seeded generator, for policies that draw) and returns a
`Scorer`; `Scorer.score(req, feasible)` gives one score per node (higher is better, `-inf` where
the pod does not fit) and, optionally, the device each node would give a device share.
`select` picks the best node; ties go to the earliest node of the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from federation.nodeplacement.pool import BoolArray, FloatArray, IntArray, PodRequest, Pool


@dataclass(frozen=True, slots=True)
class NodeScores:
    """Per-node scores (`-inf`: infeasible) and, for shares, the device chosen (-1: default)."""

    values: FloatArray
    share_device: IntArray | None = None

    def devices_for(self, pool: Pool, i: int, req: PodRequest) -> tuple[int, ...]:
        """The devices node `i` would give `req`: the scorer's choice, else `devices.fit`'s."""
        if self.share_device is not None and self.share_device[i] >= 0:
            return (int(self.share_device[i]),)
        return pool.choose_devices(i, req)


class Scorer(Protocol):
    """Scores nodes of the pool it was bound to."""

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        """Scores for `req`; only nodes where `feasible` holds get a finite score."""
        ...


class Policy(Protocol):
    """A node-level placement policy."""

    name: str

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A scorer reading `pool` (which may change between calls)."""
        ...


def masked(values: FloatArray, feasible: BoolArray) -> FloatArray:
    """`values` where feasible, `-inf` elsewhere."""
    result: FloatArray = np.where(feasible, values, -np.inf)
    return result


def select(scores: NodeScores) -> int | None:
    """The index of the best-scored feasible node, the lowest index on ties, or None.

    Ties go to the earliest node of the pool, so the pool's order is the tie-breaker (the
    simulator shuffles it per seed, as upstream renames nodes with a random prefix).
    """
    values = scores.values
    i = int(values.argmax()) if values.size else 0
    return None if not values.size or values[i] == -np.inf else i


def normalized(scores: NodeScores) -> FloatArray:
    """Scores rescaled to 0-100 over the feasible nodes (kube-scheduler's extender range)."""
    values = scores.values
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros_like(values)
    lo, hi = values[finite].min(), values[finite].max()
    span = hi - lo
    result: FloatArray = np.where(finite, 100.0 * (values - lo) / span if span > 0 else 100.0, 0.0)
    return result
