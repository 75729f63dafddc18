"""How much of a free device piece the shares still to come are expected to leave idle.

A share placed on a device leaves a piece of free capacity behind. Whether that piece is waste
depends on the shares that follow: a 0.19 piece next to a 0.81 share stays idle unless one of
the rare small shares arrives, a 0.53 piece is likely to take a common 0.47 share. FGD's
fragmentation sees only the next pod. `cpu_piece_waste` estimates, for every piece size and
free CPU of its node, the capacity still idle after `ARRIVALS` shares drawn from the target
workload's share types, each taking the piece when its size and its CPU fit and using that CPU
up: a piece on a node whose CPU is (nearly) spent stays idle.
"""

from __future__ import annotations

import functools

import numpy as np

from federation.nodeplacement.pool import FloatArray
from federation.nodeplacement.workload import TargetWorkload
from federation.scheduling.devices import WHOLE

ARRIVALS = 12  # shares looked ahead (16 and 8 did worse on some variants: docs/simulator.md)
CPU_STEP = 500  # milli-CPU per step of the free-CPU axis of `cpu_piece_waste`


def cpu_piece_waste(
    workload: TargetWorkload, cpu_max: int, model: str | None = None, arrivals: int = ARRIVALS
) -> FloatArray:
    """Index [c, r]: expected idle milli of a free piece of r milli on a node with c * CPU_STEP
    free milli-CPU (c up to `cpu_max`), after `arrivals` shares of the workload's share types
    (those that accept `model`), each taking the piece when its size and its CPU (rounded up
    to CPU_STEP) fit, and using up that CPU. A whole free device counts 0."""
    steps = cpu_max // CPU_STEP + 1
    types: dict[tuple[int, int], float] = {}
    for t, w in zip(workload.types, workload.weights, strict=True):
        if (
            t.count == 1
            and 0 < t.milli < WHOLE
            and (model is None or not t.models or model in t.models)
        ):
            key = (t.milli, -(-t.cpu_milli // CPU_STEP))
            types[key] = types.get(key, 0.0) + w
    total = sum(types.values())
    waste = np.tile(np.arange(WHOLE + 1, dtype=np.float64), (steps, 1))
    for _ in range(arrivals if types else 0):
        after = waste.copy()  # a share that does not take the piece leaves it as it was
        for (milli, cpu), w in types.items():
            if cpu < steps:  # where it takes it: the smaller piece with less CPU instead
                region = after[cpu:, milli:]
                region += (w / total) * (
                    waste[: steps - cpu, : WHOLE + 1 - milli] - waste[cpu:, milli:]
                )
        waste = after
    waste[:, WHOLE] = 0.0
    return waste


@functools.lru_cache(maxsize=8)
def waste_by_model(
    workload: TargetWorkload, model_names: tuple[str, ...], cpu_max: int
) -> FloatArray:
    """`cpu_piece_waste` per model: [k + 1, c, r] for model k (k + 1 = 0: nodes without
    devices, any share type). Kept for the last few workloads (six models on 96-CPU nodes take
    about 0.3 s, and the extender binds a policy again as its workload drifts); read-only."""
    table = np.stack(
        [cpu_piece_waste(workload, cpu_max)]
        + [cpu_piece_waste(workload, cpu_max, m) for m in model_names]
    )
    table.flags.writeable = False
    return table
