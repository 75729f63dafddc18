"""The paper's discretization of per-arrival metrics."""

from __future__ import annotations

import numpy as np

from federation.simulation.metrics import Trajectory, discretize


def test_points_average_the_events_that_round_to_them() -> None:
    # capacity 1000 milli: one point per 10 milli arrived
    traj = Trajectory(
        total_milli=1000,
        arrived_milli=np.array([10, 12, 30, 300]),
        used_milli=np.array([10, 10, 20, 250]),
        frag_milli=np.array([100.0, 200.0, 300.0, 500.0]),
    )
    curves = discretize(traj)
    assert curves.alloc_pct[1] == 1.0 and curves.frag_pct[1] == 15.0
    assert curves.frag_ratio_pct[1] == round(100 * (100 / 990 + 200 / 990) / 2, 2)
    assert curves.alloc_pct[2] == 1.33  # no event rounds to 2 %: mean over 1..3 %
    assert np.isnan(curves.alloc_pct[10]) and curves.unallocated_pct[30] == 75.0
