"""How much of a free device piece the shares still to come are expected to leave idle.

A share placed on a device leaves a piece of free capacity behind. Whether that piece is waste
depends on the shares that follow: a 0.19 piece next to a 0.81 share stays idle unless one of
the rare small shares arrives, a 0.53 piece is likely to take a common 0.47 share. FGD's
fragmentation sees only the next pod. `piece_waste` estimates, for every piece size, the
capacity still idle after `ARRIVALS` shares drawn from the target workload's share sizes, each
taking the piece when it fits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from federation.nodeplacement.pool import FloatArray
from federation.nodeplacement.workload import TargetWorkload
from federation.scheduling.devices import WHOLE

ARRIVALS = 12  # shares looked ahead (16 and 8 did worse on some variants: docs/simulator.md)


def share_sizes(workload: TargetWorkload, model: str | None = None) -> dict[int, float]:
    """Share size (milli) -> probability among the workload's share types (those that accept
    `model`, when given)."""
    weights: dict[int, float] = {}
    for t, w in zip(workload.types, workload.weights, strict=True):
        if (
            t.count == 1
            and 0 < t.milli < WHOLE
            and (model is None or not t.models or model in t.models)
        ):
            weights[t.milli] = weights.get(t.milli, 0.0) + w
    total = sum(weights.values())
    return {s: w / total for s, w in sorted(weights.items())}


def piece_waste(
    workload: TargetWorkload, model: str | None = None, arrivals: int = ARRIVALS
) -> FloatArray:
    """Index r (0..WHOLE): expected idle milli of a free piece of r milli after `arrivals`
    shares. A whole free device counts 0: whole-device pods take it."""
    sizes = share_sizes(workload, model)
    r = np.arange(WHOLE + 1)
    waste = r.astype(np.float64)
    for _ in range(arrivals if sizes else 0):
        waste = sum(
            (p * np.where(r >= s, waste[np.maximum(r - s, 0)], waste) for s, p in sizes.items()),
            np.zeros(WHOLE + 1),
        )
    waste[WHOLE] = 0.0
    return waste


def waste_by_model(workload: TargetWorkload, model_names: Sequence[str]) -> FloatArray:
    """`piece_waste` per model: row k + 1 for model k (row 0, nodes without devices: any)."""
    return np.stack([piece_waste(workload)] + [piece_waste(workload, m) for m in model_names])
