"""Per-arrival metrics and the paper's discretization into 1 %-of-capacity points.

After every arriving pod (placed or failed) we record the GPU demand arrived so far, the GPUs
allocated, and the fragmented GPUs (sum of F_n(M)). The paper's curves (upstream
`merge_*_discrete.py`) take, for each integer x in 0..130, the mean over the events whose
arrived demand rounds to x % of the cluster's GPUs (or, if there is none, to x-1..x+1 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from federation.nodeplacement.pool import FloatArray, IntArray

POINTS = 131  # 0 % .. 130 % of capacity arrived


@dataclass(frozen=True)
class Trajectory:
    """Event series of one replay (one row per arriving pod)."""

    total_milli: int
    arrived_milli: IntArray
    used_milli: IntArray
    frag_milli: FloatArray

    @property
    def idle_milli(self) -> IntArray:
        """Unallocated GPU capacity after each event."""
        result: IntArray = self.total_milli - self.used_milli
        return result


@dataclass(frozen=True)
class Curves:
    """The paper's discrete curves, indexed by % of capacity arrived (NaN where no data)."""

    alloc_pct: FloatArray  # GPU allocation ratio, % of all GPUs
    frag_pct: FloatArray  # fragmented GPUs, % of all GPUs
    frag_ratio_pct: FloatArray  # fragmented GPUs, % of idle GPUs

    @property
    def unallocated_pct(self) -> FloatArray:
        """100 - allocation ratio, the paper's "unallocated GPU %"."""
        result: FloatArray = 100.0 - self.alloc_pct
        return result


def discretize(traj: Trajectory) -> Curves:
    """Bin a trajectory into the paper's 0..130 % points."""
    scale = traj.total_milli / 100.0
    arrive = np.round(traj.arrived_milli / scale)
    alloc = np.round(traj.used_milli / scale, 2)
    frag = traj.frag_milli / scale
    idle = np.maximum(traj.idle_milli, 1)
    ratio = np.round(100.0 * traj.frag_milli / idle, 2)
    out = np.full((3, POINTS), np.nan)
    for x in range(POINTS):
        hit = arrive == x
        if not hit.any():
            hit = (arrive >= x - 1) & (arrive <= x + 1)
            if not hit.any():
                continue
        out[:, x] = np.round([alloc[hit].mean(), frag[hit].mean(), ratio[hit].mean()], 2)
    return Curves(out[0], out[1], out[2])
