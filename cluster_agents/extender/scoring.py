"""Prioritize: score nodes 0-10 with a placement policy over a pool mirrored from the cache.

The pool (`federation.nodeplacement.Pool`, one row per node and model) lives as long as
the node layout does. Before each call the rows of nodes changed since the last one (the
cache's change journal) are re-synced to the cache's occupancy by removing and placing only
what differs (`Pool.place` goes through `devices.allocate`, so the pool never drifts from the
device model). Policies keep their per-node caches between calls, which keeps a call at 1,000
nodes to about a millisecond. Fit itself comes from the cache's fit tables (the filter's).

FGD and Suanpan measure fragmentation against the observed workload (the task types of the
active pods, refreshed every `workload_ttl_s` or when a new type shows up).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from cluster_agents.extender.cache import Cache
from cluster_agents.kube.occupancy import NodeInventory, Placed
from cluster_agents.kube.pods import Demand
from federation.catalog import Catalog, ResolvedDevices
from federation.nodeplacement import (
    BestFitPolicy,
    NodeScores,
    PodRequest,
    Policy,
    Pool,
    PoolNode,
    Scorer,
    TaskType,
    make_policy,
    normalized,
    task_type,
    typical_workload,
)
from federation.nodeplacement.pool import BoolArray
from federation.scheduling.devices import NodeDevices, Preference

POLICIES = ("suanpan", "fgd", "binpack", "spread")
MAX_PRIORITY = 10  # kube-scheduler's MaxExtenderPriority


@dataclass
class _SpreadScorer:
    inner: Scorer

    def score(self, req: PodRequest, feasible: BoolArray) -> NodeScores:
        scores = self.inner.score(req, feasible)
        return NodeScores(np.where(feasible, -scores.values, -np.inf), scores.share_device)


class SpreadPolicy:
    """The most free capacity left after placement (best fit, reversed)."""

    name = "spread"

    def bind(self, pool: Pool, rng: np.random.Generator) -> Scorer:
        """A deterministic scorer."""
        return _SpreadScorer(BestFitPolicy().bind(pool, rng))


def policy(name: str, workload: Iterable[TaskType] = ()) -> Policy:
    """The policy behind `--policy` (see POLICIES); `workload` feeds fgd and suanpan."""
    if name == "binpack":
        return BestFitPolicy()
    if name == "spread":
        return SpreadPolicy()
    if name in ("fgd", "suanpan"):
        return make_policy(name, typical_workload(workload))
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")


def preference(name: str) -> Preference:
    """How `devices.fit` picks devices at bind under the policy `name`."""
    return "spread" if name == "spread" else "pack"


def accepted_models(catalog: Catalog, target: str) -> frozenset[str]:
    """Model keys a demand's target may run on (one model, or all sharing a resource name)."""
    model = catalog.get(target)
    if model is not None:
        return frozenset({model.key})
    return frozenset(m.key for m in catalog.models.values() if target in m.resources)


def _all_healthy(info: NodeInventory, resolved: ResolvedDevices) -> NodeDevices:
    """A pool row's devices: health only matters to fit (the filter), and a pod may still hold
    a device that turned sick, which the pool could not place."""
    empty = info.empty(resolved)
    return replace(empty, healthy=(True,) * empty.size)


class Prioritizer:
    """Scores nodes for a demand with one placement policy over a mirrored pool."""

    def __init__(
        self,
        cache: Cache,
        policy_name: str = "suanpan",
        *,
        clock: Callable[[], float] = time.monotonic,
        workload_ttl_s: float = 60.0,
    ) -> None:
        policy(policy_name)  # fail early on a bad name
        self.cache = cache
        self.policy_name = policy_name
        self._clock = clock
        self._ttl = workload_ttl_s
        self._layout = -1
        self._seen = 0  # the cache's changes the pool reflects
        self._pool = Pool([])
        self._rows: dict[tuple[str, str], int] = {}
        self._node_rows: dict[str, list[int]] = {}
        self._by_target: dict[str, dict[str, int]] = {}
        self._models: dict[str, frozenset[str]] = {}
        self._placed: list[tuple[Placed, ...]] = []
        self._scorer: Scorer | None = None
        self._types: set[TaskType] = set()
        self._scored_at = 0.0

    def scores(self, demand: Demand, names: Iterable[str]) -> dict[str, int]:
        """Score 0..10 per node name; 0 for nodes where the demand does not fit."""
        names = list(names)
        result = dict.fromkeys(names, 0)
        scored = self._scored(demand, names)
        if scored is not None:
            fitting, rows, scores = scored
            scaled = np.rint(normalized(scores)[rows] * MAX_PRIORITY / 100).astype(int).tolist()
            result.update(zip(fitting, scaled, strict=True))
        return result

    def best(self, demand: Demand, names: Iterable[str]) -> str | None:
        """The node of `names` the policy scores highest for `demand`, the first of equals
        (the simulator's `select` on these nodes, not kube-scheduler's 0..10 rounding); None
        when it fits none."""
        scored = self._scored(demand, list(names))
        if scored is None:
            return None
        fitting, rows, scores = scored
        return fitting[int(np.argmax(scores.values[rows]))]

    def _scored(
        self, demand: Demand, names: list[str]
    ) -> tuple[list[str], list[int], NodeScores] | None:
        """The nodes of `names` where `demand` fits, their pool rows and the policy's scores
        over the pool (finite on those rows only); None when it fits none."""
        self._catch_up()
        of_target = self._rows_of(demand.target)
        passed = self.cache.fit_table(demand).passed
        fitting = [n for n in names if n in passed and n in of_target]
        if not fitting:
            return None
        rows = [of_target[n] for n in fitting]
        feasible = np.zeros(len(self._pool), dtype=np.bool_)
        feasible[rows] = True
        req = self._request(demand)
        return fitting, rows, self._scorer_for(req).score(req, feasible)

    def _request(self, demand: Demand) -> PodRequest:
        models = self._models.get(demand.target)
        if models is None:
            models = self._models[demand.target] = accepted_models(
                self.cache.catalog, demand.target
            )
        return PodRequest(demand.cpu_milli, demand.memory_mib, demand.request, models)

    def _rows_of(self, target: str) -> dict[str, int]:
        """Node name -> pool row of the devices `target` means on that node."""
        rows = self._by_target.get(target)
        if rows is None:
            rows = {}
            for name, info in self.cache.nodes.items():
                resolved = info.resolve(target)
                if resolved is not None:
                    rows[name] = self._rows[(name, resolved.model.key)]
            self._by_target[target] = rows
        return rows

    def _catch_up(self) -> None:
        """Re-sync the rows of nodes changed since the last call; rebuild on a new layout."""
        changed = self.cache.changed_since(self._seen)
        if changed is None or self._layout != self.cache.layout:
            self._rebuild()
            return
        for name in changed:
            for row in self._node_rows.get(name, ()):
                self._sync(row)
        self._seen = self.cache.changes

    def _rebuild(self) -> None:
        cache = self.cache
        keys = [
            (info, resolved)
            for info in sorted(cache.nodes.values(), key=lambda n: n.name)
            for resolved in info.devices
        ]
        self._pool = Pool(
            [
                PoolNode(info.name, info.cpu_milli, info.memory_mib, _all_healthy(info, resolved))
                for info, resolved in keys
            ]
        )
        self._rows = {(info.name, r.model.key): i for i, (info, r) in enumerate(keys)}
        self._node_rows = {}
        for (name, _), row in self._rows.items():
            self._node_rows.setdefault(name, []).append(row)
        self._by_target = {}
        self._placed = [()] * len(keys)
        self._scorer = None
        for row in range(len(keys)):
            self._sync(row)
        self._layout, self._seen = cache.layout, cache.changes

    def _sync(self, row: int) -> None:
        """Bring pool row `row` to its node's current occupancy, changing only what changed."""
        name = self._pool.names[row]
        model = self._pool.model_names[int(self._pool.model_id[row])]
        current = self.cache.occupancy(name, model).placed
        before, after = Counter(self._placed[row]), Counter(current)
        for placed in (before - after).elements():
            self._pool.remove(row, placed.request, placed.devices)
        for placed in (after - before).elements():
            self._pool.place(row, placed.request, placed.devices)
        self._placed[row] = current

    def _scorer_for(self, req: PodRequest) -> Scorer:
        wanted = task_type(req)
        stale = self._clock() - self._scored_at > self._ttl or wanted not in self._types
        if self._scorer is None or (self.policy_name in ("fgd", "suanpan") and stale):
            types = Counter(task_type(self._request(d)) for d in self.cache.demands())
            if not types[wanted]:  # the pod being scheduled counts, even if not cached yet
                types[wanted] = 1
            self._types = set(types)
            self._scorer = policy(self.policy_name, types.elements()).bind(
                self._pool, np.random.default_rng(0)
            )
            self._scored_at = self._clock()
        return self._scorer
