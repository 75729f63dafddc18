"""The share lookahead: expected waste of the piece a share leaves, and Suanpan's use of it."""

from __future__ import annotations

import numpy as np

from federation.nodeplacement import TargetWorkload, TaskType, make_policy, select
from federation.nodeplacement.lookahead import CPU_STEP, cpu_piece_waste, waste_by_model
from federation.scheduling.devices import WHOLE
from tests.unit.nodeplacement.builders import gpu_node, gpus, pool_of

# Most shares ask 0.4 GPU, a few 0.25; half the tasks want a whole GPU.
SHARES = TargetWorkload(
    (TaskType(1000, 400, 1), TaskType(1000, 250, 1), TaskType(1000, 1000, 1)), (0.45, 0.05, 0.5)
)


def piece_waste(workload: TargetWorkload, arrivals: int = 12) -> np.ndarray:
    """The lookahead without CPU, by hand: expected idle milli of a piece of r milli after
    `arrivals` shares drawn from the workload's share sizes, each taking it when it fits."""
    sizes: dict[int, float] = {}
    for t, w in zip(workload.types, workload.weights, strict=True):
        if t.count == 1 and 0 < t.milli < WHOLE:
            sizes[t.milli] = sizes.get(t.milli, 0.0) + w
    total = sum(sizes.values())
    r = np.arange(WHOLE + 1)
    waste = r.astype(np.float64)
    for _ in range(arrivals):
        waste = sum(
            (
                w / total * np.where(r >= s, waste[np.maximum(r - s, 0)], waste)
                for s, w in sizes.items()
            ),
            np.zeros(WHOLE + 1),
        )
    waste[WHOLE] = 0.0
    return waste


def test_a_share_type_only_for_another_model_is_not_looked_ahead() -> None:
    only_a100 = TargetWorkload(
        (TaskType(1000, 300, 1, ("A100",)), TaskType(1000, 500, 1)), (0.5, 0.5)
    )
    t4 = cpu_piece_waste(only_a100, 4000, "T4")
    assert t4[-1, 300] == 300.0 and t4[-1, 500] == 0.0  # only the 0.5 share comes to a T4


def test_a_piece_a_common_share_fits_is_expected_to_fill() -> None:
    waste = piece_waste(SHARES)
    assert waste[0] == 0.0 and waste[1000] == 0.0  # nothing free; a whole GPU is no waste
    assert waste[200] == 200.0  # no share fits: all of it stays idle
    assert waste[400] < 20.0 < 150.0 < waste[600]  # 0.4 fills 0.4; 0.6 keeps 0.2 after it
    by_model = waste_by_model(SHARES, ("T4",), 4000)
    assert by_model.shape == (2, 4000 // CPU_STEP + 1, 1001)
    assert np.allclose(by_model[1, -1], waste)  # CPU for every share: as without CPU


def test_a_piece_on_a_node_without_cpu_for_the_next_share_stays_idle() -> None:
    waste = cpu_piece_waste(SHARES, 4000)
    assert waste[0, 400] == 400.0  # no CPU left: the 0.4 piece is never filled
    assert waste[1000 // CPU_STEP, 400] < 20.0  # CPU for one 0.4 share: it fills
    # CPU for one share only: a 0.8 piece keeps the 0.4 the second share cannot take
    assert waste[1000 // CPU_STEP, 800] > 300.0 > 100.0 > waste[-1, 800]


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


def test_suanpan_does_not_count_on_shares_a_node_has_no_cpu_for() -> None:
    # A 0.25 share leaves a 0.7 piece on either node, and CPU for the next share on both, so
    # FGD's growth is the same and the first node wins. On "tight" that is the last share its
    # CPU allows (0.3 stays idle after a 0.4); on "roomy" a 0.4 and a 0.25 fill it to 0.05.
    nodes = [gpu_node("tight", (50,), cpu=2500), gpu_node("roomy", (50,))]
    pool = pool_of(*nodes)
    req = gpus(milli=250)
    pick = select(
        make_policy("suanpan", SHARES)
        .bind(pool, np.random.default_rng(0))
        .score(req, pool.feasible(req))
    )
    assert pick == 1
