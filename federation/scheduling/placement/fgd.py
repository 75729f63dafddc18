"""Fragmentation gradient descent (FGD) and Suanpan's refinement of it.

FGD scores a node by how little the pod grows the node's fragmentation F_n(M) for the target
workload: `int(100 * sigmoid((F_before - F_after) / 1000))`, kube-scheduler's integer range as
upstream computes it. A share tries every device with room and keeps the best (first on ties).

Suanpan keeps FGD's measure but drops the integer rounding, which in FGD lumps together every
change below ~0.04 GPU and leaves the choice among them to chance. Among nodes whose growth is
equal it prefers, in order: the node whose fragmentation stays smallest relative to its free
capacity, and then the node with the fewest free devices of the pod's own model (best fit), so
that large, intact nodes stay free for large pods. All of it is deterministic.

Scores are cached per task shape and node; a node is re-scored only when its `version` changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from federation.scheduling.placement.base import NodeScores, Scorer, masked
from federation.scheduling.placement.fragmentation import FragModel, FragTracker
from federation.scheduling.placement.pool import BoolArray, FloatArray, IntArray, PodRequest, Pool
from federation.scheduling.placement.workload import TargetWorkload, task_type

MAX_SCORE = 100
_Key = tuple[int, int, int, bool]


@dataclass
class _Entry:
    """Cached per-node result for one task shape."""

    seen: IntArray
    growth: FloatArray
    device: IntArray


@dataclass
class _AfterStates:
    """States after placement; row r is node `node[r]` with the share on `device[r]`."""

    node: IntArray
    device: IntArray
    cpu_free: IntArray
    free: IntArray


def _after_states(pool: Pool, rows: IntArray, req: PodRequest, cpu: int) -> _AfterStates:
    dev = req.device
    cpu_after = pool.cpu_free[rows] - cpu
    if dev is None:
        return _AfterStates(rows, np.full(rows.size, -1), cpu_after, pool.free[rows])
    if dev.is_share:
        node_idx, dev_idx = np.nonzero(pool.share_room(dev)[rows])
        nodes = rows[node_idx]
        free = pool.free[nodes].copy()
        free[np.arange(nodes.size), dev_idx] -= dev.milli
        return _AfterStates(nodes, dev_idx, pool.cpu_free[nodes] - cpu, free)
    free = pool.free[rows].copy()
    usable = pool.whole_free(dev.memory_mib)[rows]
    taken = usable & (np.cumsum(usable, axis=1) <= dev.count)
    for r in np.flatnonzero(~pool.simple[rows]):
        taken[r] = False
        taken[r, list(pool.choose_devices(int(rows[r]), req))] = True
    free[taken] = 0
    return _AfterStates(rows, np.full(rows.size, -1), cpu_after, free)


@dataclass
class _FragScorer:
    pool: Pool
    model: FragModel
    quantize: bool
    tracker: FragTracker = field(init=False)
    cache: dict[_Key, _Entry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tracker = FragTracker(self.pool, self.model)

    def growth(self, req: PodRequest, feasible: BoolArray) -> tuple[FloatArray, IntArray]:
        """Per node: how much F_n(M) grows (quantized score for FGD) and the share's device."""
        pool = self.pool
        t = task_type(req)
        key = (t.cpu_milli, t.milli, t.count, req.device is not None and req.device.is_share)
        n = len(pool)
        entry = self.cache.setdefault(
            key, _Entry(np.full(n, -1), np.zeros(n), np.full(n, -1, dtype=np.int64))
        )
        rows = np.flatnonzero(feasible & (entry.seen != pool.version))
        if rows.size:
            before = self.tracker.current()
            after = _after_states(pool, rows, req, t.cpu_milli)
            frag = self.model.frag(after.cpu_free, after.free, pool.model_id[after.node])
            growth = np.round(frag - before[after.node], 6)
            if self.quantize:
                growth = -np.floor(MAX_SCORE / (1.0 + np.exp(growth / 1000.0)))
            # keep, per node, the smallest growth (first device on ties)
            order = np.lexsort((after.device, growth, after.node))
            first = np.ones(order.size, dtype=np.bool_)
            first[1:] = after.node[order][1:] != after.node[order][:-1]
            best = order[first]
            entry.growth[after.node[best]] = growth[best]
            entry.device[after.node[best]] = after.device[best]
            entry.seen[rows] = pool.version[rows]
        return entry.growth, entry.device


@dataclass
class _FGDScorer:
    frag: _FragScorer

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        growth, device = self.frag.growth(req, feasible)
        return NodeScores(masked(-growth, feasible), device.copy())


class FGDPolicy:
    """Fragmentation gradient descent with upstream's integer scores (ties at random)."""

    name = "fgd"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A scorer with its own fragmentation cache for `pool`."""
        return _FGDScorer(_FragScorer(pool, FragModel(self.workload, pool.model_names), True))


@dataclass
class _SuanpanScorer:
    frag: _FragScorer

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        pool = self.frag.pool
        growth, device = self.frag.growth(req, feasible)
        frag_now = self.frag.tracker.current()
        idle = np.maximum(pool.free.sum(axis=1), 1)
        same_model = pool.whole_free().sum(axis=1)
        scale = float(max(pool.total_milli, 1))
        # lexicographic: growth, then fragmented share of the node, then fewest free devices
        values = -growth * 4.0 - (frag_now / idle) * 1e-3 - same_model / scale * 1e-6
        return NodeScores(masked(values, feasible), device.copy())


class SuanpanPolicy:
    """FGD's measure without integer rounding, with deterministic best-fit tie-breaking."""

    name = "suanpan"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A scorer with its own fragmentation cache for `pool`."""
        return _SuanpanScorer(_FragScorer(pool, FragModel(self.workload, pool.model_names), False))
