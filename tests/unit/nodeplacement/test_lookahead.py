"""The share lookahead: expected waste of the piece a share leaves, and Suanpan's use of it."""

from __future__ import annotations

import numpy as np

from federation.nodeplacement import TargetWorkload, TaskType, make_policy, select
from federation.nodeplacement.lookahead import piece_waste, share_sizes, waste_by_model
from tests.unit.nodeplacement.builders import gpu_node, gpus, pool_of

# Most shares ask 0.4 GPU, a few 0.25; half the tasks want a whole GPU.
SHARES = TargetWorkload(
    (TaskType(1000, 400, 1), TaskType(1000, 250, 1), TaskType(1000, 1000, 1)), (0.45, 0.05, 0.5)
)


def test_share_sizes_are_the_share_types_renormalized() -> None:
    assert share_sizes(SHARES) == {250: 0.05 / 0.5, 400: 0.45 / 0.5}
    only_a100 = TargetWorkload(
        (TaskType(1000, 300, 1, ("A100",)), TaskType(1000, 500, 1)), (0.5, 0.5)
    )
    assert share_sizes(only_a100, "T4") == {500: 1.0}


def test_a_piece_a_common_share_fits_is_expected_to_fill() -> None:
    waste = piece_waste(SHARES)
    assert waste[0] == 0.0 and waste[1000] == 0.0  # nothing free; a whole GPU is no waste
    assert waste[200] == 200.0  # no share fits: all of it stays idle
    assert waste[400] < 20.0 < 150.0 < waste[600]  # 0.4 fills 0.4; 0.6 keeps 0.2 after it
    by_model = waste_by_model(SHARES, ["T4"])
    assert by_model.shape == (2, 1001) and np.array_equal(by_model[1], waste)


def test_suanpan_leaves_the_piece_the_next_shares_fill() -> None:
    # A 0.25 share on "wide" (0.85 free) leaves 0.6, on "snug" (0.65 free) 0.4: FGD's growth
    # is the same (-125 milli), so FGD takes the first node; only 0.4 is filled by a 0.4 share.
    nodes = [gpu_node("wide", (150,)), gpu_node("snug", (350,))]
    pool = pool_of(*nodes)
    req = gpus(milli=250)
    picks = [
        select(
            make_policy(p, SHARES)
            .bind(pool, np.random.default_rng(0))
            .score(req, pool.feasible(req))
        )
        for p in ("fgd", "suanpan")
    ]
    assert picks == [0, 1]
