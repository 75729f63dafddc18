"""Fragmentation gradient descent (FGD) and Suanpan's refinement of it.

FGD scores a node by how little the pod grows the node's fragmentation F_n(M) for the target
workload: `int(100 * sigmoid((F_before - F_after) / 1000))`, kube-scheduler's integer range as
upstream computes it. A share tries every device with room and keeps the best (first on ties).

FGD's integer score lumps together every growth below ~0.04 GPU; ties then go to the earliest
node of the pool, which packs (an exact, unrounded FGD spreads and does worse). Suanpan keeps
the score and that packing order, and breaks its ties by what FGD's one-step measure misses,
with coarse keys only (a fine key would spread pods and lose the packing):

- stranded devices: free device capacity that the node's free CPU cannot serve at the CPU per
  device asked by the task types that can use the node's model. A pod that would strand more
  (in quarters of a device) ranks lower. Without CPU limits FGD is within 0.1 point of the
  offline packing bound on openb; nearly all of its excess is devices stranded by CPU.
- model pressure: demand of model-constrained task types per device of the node's model, so
  that unconstrained pods leave scarce models to the pods that need them.
- a CPU-only pod prefers the node with the fewest free devices, where that strands nothing.

- a share looks ahead (`lookahead`): FGD's growth, before the integer score is taken, counts
  also how the share changes the expected idle capacity of its device's free piece after the
  next shares of the target workload (those that accept the node's model), and a node's devices
  tie on that too. So a share leaves a piece that a common size fills (0.47 next to 0.53) rather
  than a sliver only rare sizes fit (0.19 next to 0.81). Not when the workload is CPU-short:
  then whether a piece fills depends on the node's CPU, and the lookahead lost to FGD there.

When the target workload asks more CPU than the pool has by the time its devices are full
(`cpu_short`), devices will be stranded by CPU whatever the tie-breaks do, and what decides the
outcome is how much CPU is left idle where no pod can use it. Then Suanpan drops the tie keys and
extends FGD's measure to CPU: a device pod's growth also counts the growth of the node's CPU
fragmentation (`FragModel.cpu_frag`: free CPU counted for each task type, CPU-only ones included,
that no longer fits the node), in milli-devices at the pool's devices per CPU. CPU-only pods place
as in FGD.

- FGD's measure itself weighs a task type by how many pods it has. Suanpan weighs a type that
  is over-demanded (the types confined to its hosts ask more devices than those nodes have:
  8-GPU pods asking more CPU than most nodes have) by its devices per pod and by how many
  times over its hosts are asked for too (`over_demanded`), so that its few hosts are kept
  whole for it. And on those hosts, the types that cannot use them do not count in FGD's
  measure (`kept_whole`): else a node few types can use looks worth filling with anything.
  A workload without an over-demanded set places as FGD's measure says.

All of it is deterministic.

Scores are cached per task shape and node; a node is re-scored only when its `version` changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from federation.nodeplacement.base import NodeScores, Scorer, masked
from federation.nodeplacement.fragmentation import FragModel, FragTracker
from federation.nodeplacement.lookahead import CPU_STEP, waste_by_model
from federation.nodeplacement.pool import BoolArray, FloatArray, IntArray, PodRequest, Pool
from federation.nodeplacement.workload import TargetWorkload, task_type
from federation.scheduling.devices import WHOLE

MAX_SCORE = 100
_Key = tuple[int, int, int, int, bool]


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
    tracker: FragTracker = field(init=False)
    cache: dict[_Key, _Entry] = field(default_factory=dict)
    waste: FloatArray | None = None  # `lookahead.waste_by_model`: share lookahead if given
    cpu_weight: float = 0.0  # milli-device per milli-CPU: device pods also count CPU growth
    node_weight: FloatArray | None = None  # per node, the types' weights (`kept_whole`)

    def __post_init__(self) -> None:
        self.tracker = FragTracker(self.pool, self.model, self.node_weight)

    def growth(self, req: PodRequest, feasible: BoolArray) -> tuple[FloatArray, IntArray]:
        """Per node: minus FGD's integer score (lower is better) and the share's device."""
        pool = self.pool
        t = task_type(req)
        dev = req.device
        key = (
            t.cpu_milli,
            t.milli,
            t.count,
            dev.memory_mib if dev else 0,
            bool(dev and dev.is_share),
        )
        n = len(pool)
        entry = self.cache.setdefault(
            key, _Entry(np.full(n, -1), np.zeros(n), np.full(n, -1, dtype=np.int64))
        )
        rows = np.flatnonzero(feasible & (entry.seen != pool.version))
        if rows.size:
            before = self.tracker.current()
            after = _after_states(pool, rows, req, t.cpu_milli)
            frag = self.tracker.frag(after.node, after.cpu_free, after.free)
            growth = np.round(frag - before[after.node], 6)
            if self.cpu_weight and dev is not None:
                growth = growth + np.round(self.cpu_weight * self.cpu_growth(after), 6)
            piece = np.zeros(growth.size)
            if self.waste is not None and dev is not None and dev.is_share:
                piece = self.piece_change(after, dev.milli)
                growth = growth + piece
            growth = -np.floor(MAX_SCORE / (1.0 + np.exp(growth / 1000.0)))
            # keep, per node, the best score (then the least piece waste, then first device)
            order = np.lexsort((after.device, piece, growth, after.node))
            first = np.ones(order.size, dtype=np.bool_)
            first[1:] = after.node[order][1:] != after.node[order][:-1]
            best = order[first]
            entry.growth[after.node[best]] = growth[best]
            entry.device[after.node[best]] = after.device[best]
            entry.seen[rows] = pool.version[rows]
        return entry.growth, entry.device

    def cpu_growth(self, after: _AfterStates) -> FloatArray:
        """Per row: how much the placement grows the node's CPU fragmentation (milli-CPU)."""
        pool, nodes = self.pool, after.node
        model = pool.model_id[nodes]
        change: FloatArray = self.model.cpu_frag(
            after.cpu_free, after.free, model
        ) - self.model.cpu_frag(pool.cpu_free[nodes], pool.free[nodes], model)
        return change

    def piece_change(self, after: _AfterStates, milli: int) -> FloatArray:
        """Per row: how much the share changes the expected waste of its device's piece (on
        the node's free CPU before and after it)."""
        assert self.waste is not None
        model = self.pool.model_id[after.node] + 1
        left = after.free[np.arange(after.node.size), after.device]
        last = self.waste.shape[1] - 1
        cpu_before = np.minimum(self.pool.cpu_free[after.node] // CPU_STEP, last)
        cpu_after = np.minimum(after.cpu_free // CPU_STEP, last)
        change: FloatArray = (
            self.waste[model, cpu_after, left] - self.waste[model, cpu_before, left + milli]
        )
        return change


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
        return _FGDScorer(_FragScorer(pool, FragModel(self.workload, pool.model_names)))


def model_pressure(workload: TargetWorkload, pool: Pool) -> FloatArray:
    """Per node: the expected device demand of model-constrained task types on its model,
    per device of that model in the pool (0 where no task type is constrained)."""
    demand = np.zeros(len(pool.model_names))
    for t, w in zip(workload.types, workload.weights, strict=True):
        allowed = [k for k, m in enumerate(pool.model_names) if m in t.models]
        for k in allowed:
            demand[k] += w * t.milli * t.count / len(allowed)
    has = pool.model_id >= 0
    devices = np.bincount(pool.model_id[has], pool.size[has], len(pool.model_names))
    per_device = np.append(demand / np.maximum(devices, 1), 0.0)  # model_id -1: no devices
    result: FloatArray = per_device[pool.model_id]
    return result


def cpu_per_device(model: FragModel, pool: Pool) -> FloatArray:
    """Per node: milli-CPU per milli-device that the task types able to use its model ask for
    (the whole workload's ratio for nodes no device task type can use)."""
    cpu = model.weight * model.cpu * model.needs_device
    dev = model.weight * model.milli * model.count
    overall = float(cpu.sum() / max(dev.sum(), 1e-9))
    access = model.access[pool.model_id + 1]
    asked_dev = access @ dev
    result: FloatArray = np.where(
        asked_dev > 0, (access @ cpu) / np.maximum(asked_dev, 1e-9), overall
    )
    return result


@dataclass(frozen=True)
class HostSets:
    """Hall's condition on the task types' hosts, for a workload against a pool.

    A type's hosts are the nodes that can hold one of its pods (enough CPU, devices and an
    accepted model). A set of hosts is over-demanded when the types that can run nowhere else
    ask, by their shares of the workload's device demand at a full pool, for more devices than
    it has (checked on each type's hosts): 8-GPU pods asking more CPU than most nodes have,
    each size of them alone within the few large nodes but all of them together beyond."""

    hosts: BoolArray  # [node, type]: the node can hold a pod of the type
    over: BoolArray  # [type]: confined to an over-demanded set, or hosted nowhere
    scarcity: FloatArray  # [type]: times over the scarcest set it is confined to is asked for
    scarce: BoolArray  # [node]: a host of an over-demanded set


def host_sets(model: FragModel, pool: Pool) -> HostSets | None:
    """The workload's host sets (`model`: the workload's, as built against the pool), or None
    for a workload that asks no devices."""
    asked = model.weight * model.milli * model.count
    if asked.sum() <= 0:
        return None
    demand = asked / asked.sum() * pool.total_milli
    access = model.access[pool.model_id + 1]  # [node, type]
    hosts = (
        access
        & (pool.cpu_cap[:, None] >= model.cpu[None, :])
        & (pool.size[:, None] >= model.count[None, :])
    )
    supply = (WHOLE * pool.size) @ hosts
    placeable = model.needs_device & hosts.any(axis=0)
    over = model.needs_device & ~placeable  # every pod of a type no node hosts leaves idle
    # inside[u, t]: every host of placeable type u is a host of type t (each kind of node
    # once: whether it hosts a type depends on its model, CPU and devices only)
    _, first = np.unique(
        np.stack([pool.model_id, pool.cpu_cap, pool.size], axis=1), axis=0, return_index=True
    )
    kinds = hosts[first].astype(np.float64)
    inside = kinds[:, placeable].T @ (1.0 - kinds) == 0
    # (at a full pool the whole pool's demand is its supply: rounding must not make it short)
    need = demand[placeable] @ inside
    short = model.needs_device & (need > supply * (1.0 + 1e-9))
    scarcity = np.ones(len(over))
    scarcity[placeable] = np.where(inside & short, need / np.maximum(supply, 1.0), 1.0).max(
        axis=1, initial=1.0
    )
    scarce = np.asarray(hosts[:, short].any(axis=1), dtype=np.bool_)
    return HostSets(hosts, over | (scarcity > 1.0), scarcity, scarce)


def over_demanded(workload: TargetWorkload, sets: HostSets | None) -> TargetWorkload:
    """The workload with each over-demanded task type weighted by its devices per pod and by
    its scarcity.

    FGD weighs a type by how many pods it has, but each pod of an over-demanded type that finds
    no host leaves its `count` devices idle, so a node that is one of its few hosts is worth
    keeping whole by that many devices, and by how many times over those hosts are asked for
    (the price of its hosts in the packing LP's dual). Types with hosts enough keep their
    weights, and so does a workload without an over-demanded type: it places exactly as
    before."""
    if sets is None or not sets.over.any():
        return workload
    weights = np.array(workload.weights, dtype=np.float64)
    per_pod = np.array([t.count * t.milli / WHOLE for t in workload.types])
    weights = np.where(sets.over, weights * per_pod * sets.scarcity, weights)
    return TargetWorkload(workload.types, tuple(float(w) for w in weights / weights.sum()))


def kept_whole(model: FragModel, sets: HostSets | None) -> FloatArray | None:
    """Per node, the task types' weights in its fragmentation: on a host of an over-demanded
    set, a device type that cannot use the node does not count (None: no such set).

    FGD counts a node's free devices as a fragment for every type that cannot use them, so a
    node few types can use looks worth filling: 128-CPU nodes of a model that the many 1-GPU
    pods constrained to the common model refuse. But an over-demanded set's devices will be
    taken by the types confined to it whatever else happens; filling them with pods that have
    other hosts only takes them from those types. `model`: the weighted workload's."""
    if sets is None or not sets.scarce.any():
        return None
    drop = sets.scarce[:, None] & ~sets.hosts & model.needs_device[None, :]
    result: FloatArray = np.where(drop, 0.0, model.weight[None, :])
    return result


def cpu_short(model: FragModel, pool: Pool) -> bool:
    """Whether the target workload, CPU-only task types included, asks more CPU than the pool
    has by the time its devices are full."""
    dev = float((model.weight * model.milli * model.count).sum())
    if dev <= 0 or pool.total_milli == 0:
        return False
    asked = float((model.weight * model.cpu).sum()) / dev * pool.total_milli
    return asked > float(pool.cpu_cap.sum())


@dataclass
class _SuanpanScorer:
    frag: _FragScorer
    pressure: FloatArray
    cpu_ratio: FloatArray
    short: bool

    def stranded(self, cpu_free: IntArray, dev_free: IntArray) -> FloatArray:
        """Free device capacity the node's free CPU cannot serve at its tasks' CPU ratio."""
        result: FloatArray = np.maximum(dev_free - cpu_free / self.cpu_ratio, 0.0)
        return result

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        pool = self.frag.pool
        growth, device = self.frag.growth(req, feasible)
        if self.short:
            return NodeScores(masked(-growth, feasible), device.copy())
        dev_free = pool.free.sum(axis=1)
        added = self.stranded(pool.cpu_free - req.cpu_milli, dev_free - req.gpu_milli) - (
            self.stranded(pool.cpu_free, dev_free)
        )
        quarters = np.minimum(np.ceil(np.maximum(added, 0.0) / 250.0), 4.0) / 4.0
        pressure = self.pressure / max(float(self.pressure.max(initial=0.0)), 1e-9)
        tie = 0.45 * quarters + 0.45 * pressure
        if req.device is None:
            tie = tie + 0.05 * dev_free / max(pool.width * 1000, 1)
        return NodeScores(masked(-growth - tie, feasible), device.copy())


class SuanpanPolicy:
    """FGD's score with deterministic, capacity-aware tie-breaking (see the module docstring)."""

    name = "suanpan"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A scorer with its own fragmentation cache for `pool`."""
        model = FragModel(self.workload, pool.model_names)
        short = cpu_short(model, pool)
        sets = host_sets(model, pool)
        growth = FragModel(over_demanded(self.workload, sets), pool.model_names)
        waste = (
            None
            if short
            else waste_by_model(
                self.workload, tuple(pool.model_names), int(pool.cpu_cap.max(initial=0))
            )
        )
        cpu_weight = pool.total_milli / max(float(pool.cpu_cap.sum()), 1.0) if short else 0.0
        return _SuanpanScorer(
            _FragScorer(
                pool,
                growth,
                waste=waste,
                cpu_weight=cpu_weight,
                node_weight=kept_whole(growth, sets),
            ),
            model_pressure(self.workload, pool),
            cpu_per_device(model, pool),
            short,
        )
