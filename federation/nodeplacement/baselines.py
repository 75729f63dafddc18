"""The FGD paper's baseline policies, scored as the upstream simulator scores them.

Scores are kube-scheduler integers (0-100, truncated) so that ties (the earliest node wins)
fall where they fall upstream. CPU and device capacities are normalized by the largest
node of the pool (128 CPUs and 8 GPUs for openb, upstream's `MaxSpecCpu`/`MaxSpecGpu`).

- random: a uniformly random feasible node; a share takes a random device with room.
- dotprod: Tetris' alignment of free and requested (CPU, total device) vectors; lower dot product
  scores higher.
- clustering: prefer nodes already running only pods of the same shape (share, 1, 2, ... devices),
  then mixed nodes including the shape, then empty nodes, then others; fuller nodes first.
- packing: prefer partially used devices (tightest first), then free devices on used nodes, then
  empty nodes.
- bestfit: the least free CPU and device capacity left after placement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from federation.nodeplacement.base import NodeScores, Scorer, masked
from federation.nodeplacement.pool import BoolArray, FloatArray, IntArray, PodRequest, Pool
from federation.nodeplacement.workload import task_type
from federation.scheduling.devices import WHOLE

MAX_SCORE = 100


def _norms(pool: Pool) -> tuple[float, float]:
    return float(pool.cpu_cap.max(initial=1)), float(max(int(pool.size.max(initial=1)), 1) * WHOLE)


@dataclass
class _RandomScorer:
    pool: Pool
    rng: np.random.Generator

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        values = masked(self.rng.random(len(self.pool)), feasible)
        if req.device is None or not req.device.is_share:
            return NodeScores(values)
        room = self.pool.share_room(req.device)
        draw = np.where(room, self.rng.random(room.shape), -1.0)
        device = np.where(room.any(axis=1), draw.argmax(axis=1), -1)
        return NodeScores(values, device.astype(np.int64))


class RandomPolicy:
    """Uniformly random feasible node; shares take a random device with room."""

    name = "random"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A scorer drawing from `rng`."""
        return _RandomScorer(pool, rng)


@dataclass
class _DotProdScorer:
    pool: Pool

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        cpu_norm, dev_norm = _norms(self.pool)
        cpu = task_type(req).cpu_milli
        dot = (self.pool.cpu_free / cpu_norm) * (cpu / cpu_norm) + (
            self.pool.free.sum(axis=1) / dev_norm
        ) * (req.gpu_milli / dev_norm)
        return NodeScores(masked(np.floor(MAX_SCORE * (1.0 - dot / 2.0)), feasible))


class DotProdPolicy:
    """Tetris dot product of free (CPU, devices) and the request, lower is better."""

    name = "dotprod"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A deterministic scorer."""
        return _DotProdScorer(pool)


@dataclass
class _ClusteringScorer:
    pool: Pool

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        pool = self.pool
        if req.device is None:
            return NodeScores(masked(np.zeros(len(pool)), feasible))
        _, dev_norm = _norms(pool)
        shape = 0 if req.device.is_share else req.device.count
        zeros = np.zeros(len(pool), dtype=np.int64)
        same = pool.shape_counts.get(shape, zeros) > 0
        kinds = sum((c > 0).astype(np.int64) for c in pool.shape_counts.values()) + zeros
        quarter = MAX_SCORE // 4
        fill = quarter * (dev_norm - pool.free.sum(axis=1)) // dev_norm
        bonus = np.select(
            [same & (kinds == 1), same, kinds == 0], [3 * quarter, 2 * quarter, quarter], 0
        )
        return NodeScores(masked((fill + bonus).astype(np.float64), feasible))


class ClusteringPolicy:
    """Keep pods of one shape together (GPU clustering)."""

    name = "clustering"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A deterministic scorer."""
        return _ClusteringScorer(pool)


@dataclass
class _PackingScorer:
    pool: Pool

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        pool = self.pool
        if req.device is None:
            return NodeScores(masked(np.zeros(len(pool)), feasible))
        full = pool.whole_free().sum(axis=1)
        empty_node = np.maximum(MAX_SCORE // 3 - full, full)
        if req.device.is_share:
            room = pool.share_room(req.device)
            tightest = np.where(room, pool.free, WHOLE + 1).min(axis=1, initial=WHOLE + 1)
            on_used = np.where(
                tightest >= WHOLE,
                MAX_SCORE // 2 - 1,
                np.maximum(MAX_SCORE - (tightest * 100 // WHOLE) // 10, MAX_SCORE // 2),
            )
        else:
            on_used = np.full(len(pool), max(MAX_SCORE // 2 - req.device.count, MAX_SCORE // 3))
        values: IntArray = np.where(full == pool.size, empty_node, on_used)
        return NodeScores(masked(values.astype(np.float64), feasible))


class PackingPolicy:
    """Shared devices first, then free devices of used nodes, then empty nodes."""

    name = "packing"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A deterministic scorer."""
        return _PackingScorer(pool)


@dataclass
class _BestFitScorer:
    pool: Pool

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        cpu_norm, dev_norm = _norms(self.pool)
        left = (self.pool.cpu_free - task_type(req).cpu_milli) / cpu_norm * 0.5 + (
            self.pool.free.sum(axis=1) - req.gpu_milli
        ) / dev_norm * 0.5
        values: FloatArray = np.floor((1.0 - left) * MAX_SCORE)
        return NodeScores(masked(values, feasible))


class BestFitPolicy:
    """Least free CPU and device capacity left after placement."""

    name = "bestfit"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A deterministic scorer."""
        return _BestFitScorer(pool)
