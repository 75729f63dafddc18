"""GPU fragmentation of nodes with respect to a target workload (FGD, USENIX ATC '23, Sec. 4).

For a task type m and a node, the fragmented capacity F_n(m) is the node's free device capacity
that m cannot use: all of it when m needs no device, may not use the node's model, lacks CPU on
the node or finds fewer than `count` devices with `milli` free; otherwise the free pieces of
devices that are smaller than m's per-device `milli`. A node's fragmentation for the workload is
F_n(M) = sum_m p_m F_n(m); the pool's is the sum over nodes. Values are in milli-devices.

Everything is computed for a batch of node states at once (rows of `cpu_free`, `free`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from federation.nodeplacement.pool import BoolArray, FloatArray, IntArray, Pool
from federation.nodeplacement.workload import TargetWorkload


class FragModel:
    """A target workload compiled against a pool's model table, ready for batch evaluation."""

    def __init__(self, workload: TargetWorkload, model_names: Sequence[str]) -> None:
        types = workload.types
        self.weight = np.array(workload.weights, dtype=np.float64)
        self.cpu = np.array([t.cpu_milli for t in types], dtype=np.int64)
        self.milli = np.array([t.milli for t in types], dtype=np.int64)
        self.count = np.array([t.count for t in types], dtype=np.int64)
        self.needs_device = self.milli > 0
        # access[k + 1, m]: may type m use model k (row 0: a node without devices)
        self.access = np.zeros((len(model_names) + 1, len(types)), dtype=np.bool_)
        for k, name in enumerate(model_names):
            self.access[k + 1] = [
                bool(t.milli) and (not t.models or name in t.models) for t in types
            ]

    def per_type(self, cpu_free: IntArray, free: IntArray, model_id: IntArray) -> FloatArray:
        """F_n(m) for each row n and type m (a K x T matrix)."""
        total = free.sum(axis=1)
        enough = free[:, :, None] >= self.milli[None, None, :]
        usable = (free[:, :, None] * enough).sum(axis=1)
        fits: BoolArray = (
            self.access[model_id + 1]
            & (cpu_free[:, None] >= self.cpu[None, :])
            & (enough.sum(axis=1) >= self.count[None, :])
        )
        result: FloatArray = np.where(fits, total[:, None] - usable, total[:, None]).astype(
            np.float64
        )
        return result

    def cpu_frag(self, cpu_free: IntArray, free: IntArray, model_id: IntArray) -> FloatArray:
        """The same measure for CPU, per row in milli-CPU: the node's free CPU counts for each
        type that does not fit there (device types as in `per_type`, CPU-only ones by CPU)."""
        cpu_ok = cpu_free[:, None] >= self.cpu[None, :]
        enough = (free[:, :, None] >= self.milli[None, None, :]).sum(axis=1)
        fits = (self.access[model_id + 1] & (enough >= self.count[None, :]) & cpu_ok) | (
            ~self.needs_device[None, :] & cpu_ok
        )
        result: FloatArray = (np.where(fits, 0, cpu_free[:, None]) @ self.weight).astype(np.float64)
        return result

    def frag(
        self,
        cpu_free: IntArray,
        free: IntArray,
        model_id: IntArray,
        weight: FloatArray | None = None,
    ) -> FloatArray:
        """F_n(M) for each row n, in milli-devices; `weight`: the types' weights per row
        (default: the workload's everywhere)."""
        per_type = self.per_type(cpu_free, free, model_id)
        result: FloatArray = (
            per_type @ self.weight if weight is None else (per_type * weight).sum(axis=1)
        )
        return result


class FragTracker:
    """F_n(M) of every node of a pool, recomputed only for nodes that changed."""

    def __init__(self, pool: Pool, model: FragModel, weight: FloatArray | None = None) -> None:
        self.pool = pool
        self.model = model
        self.weight = weight  # per node, the types' weights (default: the workload's)
        self.values = self.frag(np.arange(len(pool)), pool.cpu_free, pool.free)
        self.seen = pool.version.copy()

    def frag(self, nodes: IntArray, cpu_free: IntArray, free: IntArray) -> FloatArray:
        """F_n(M) of node `nodes[r]` were it in state r (its free CPU and devices)."""
        weight = None if self.weight is None else self.weight[nodes]
        return self.model.frag(cpu_free, free, self.pool.model_id[nodes], weight)

    def current(self) -> FloatArray:
        """Per-node fragmentation of the pool as it is now."""
        dirty = np.flatnonzero(self.pool.version != self.seen)
        if dirty.size:
            p = self.pool
            self.values[dirty] = self.frag(dirty, p.cpu_free[dirty], p.free[dirty])
            self.seen[dirty] = p.version[dirty]
        return self.values
