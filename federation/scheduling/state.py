"""The per-cycle working copy of a snapshot: usage only, with trials that undo themselves.

Static facts (clusters, nodes, queues, jobs) stay the frozen values of the `Snapshot`; a
`State` copies only what the cycle changes: free CPU, memory, pods and devices per node, quota
usage, the set of placements. `State.trial()` opens a context in which every change is logged
and undone on exit unless kept, so a preemption dry run leaves the state exactly as it was.

Each cycle's cluster states are clones of the last cycle's (`HeldBase`: inventory with the
reservations held), brought up to date by what changed, not rebuilt.

Per cluster and flavor a `FlavorIndex` buckets nodes by their number of free whole devices,
so gang fit visits only nodes that could hold a replica and most clusters are rejected from
summary numbers alone.
"""

from __future__ import annotations

import itertools
import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from federation.scheduling.devices import WHOLE, DeviceConflict, DeviceRequest, NodeDevices
from federation.scheduling.devices import allocate as allocate_devices
from federation.scheduling.devices import release as release_devices
from federation.scheduling.model import (
    Cluster,
    Node,
    Placement,
    Snapshot,
)
from federation.scheduling.quota import QuotaLedger, demand
from federation.scheduling.running import Running, options

HARD_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
FIT_CACHE_LIMIT = 50_000  # entries of stale versions are dropped past this many


@dataclass(frozen=True, slots=True)
class Usage:
    """What one replica takes on one node (`request` None: no devices); a hold of part of a
    node's capacity may take no pod."""

    node: int
    cpu_milli: int
    memory_mib: int
    model: str = ""
    request: DeviceRequest | None = None
    devices: tuple[int, ...] = ()
    pods: int = 1


class NodeState:
    """Free capacity of one node in this cycle."""

    __slots__ = ("cpu_free", "devices", "hard_taints", "index", "memory_free", "node", "pods_free")

    def __init__(self, index: int, node: Node) -> None:
        self.index = index
        self.node = node
        self.cpu_free = node.cpu_milli - node.used_cpu_milli
        self.memory_free = node.memory_mib - node.used_memory_mib
        self.pods_free = node.pods - node.used_pods
        self.devices: dict[str, NodeDevices] = {d.model: d for d in node.devices}
        self.hard_taints = frozenset(t.key for t in node.taints if t.effect in HARD_TAINT_EFFECTS)

    def copy(self) -> NodeState:
        """An independent copy (the node and its device values are immutable, shared)."""
        other = NodeState.__new__(NodeState)
        other.index, other.node, other.hard_taints = self.index, self.node, self.hard_taints
        other.cpu_free, other.memory_free, other.pods_free = (
            self.cpu_free,
            self.memory_free,
            self.pods_free,
        )
        other.devices = dict(self.devices)
        return other

    def tolerates(self, tolerations: frozenset[str]) -> bool:
        """Whether work tolerating `tolerations` may run here."""
        return self.hard_taints <= tolerations


class FlavorIndex:
    """The ready nodes of one cluster carrying one flavor, bucketed by free whole devices.

    Buckets and `partial` are sorted lists of node indices, so visiting candidates in a
    deterministic order costs no sorting.
    """

    __slots__ = ("buckets", "free", "nodes", "partial", "total", "used_milli")

    def __init__(self) -> None:
        self.nodes: list[int] = []  # ready nodes carrying the flavor
        self.total = 0  # devices on those nodes
        self.free = 0  # free whole devices
        self.used_milli = 0
        self.buckets: list[list[int]] = [[]]  # buckets[k]: nodes with k free devices
        self.partial: list[int] = []  # nodes with a shared device that has room left

    def enter(self, node: int, devices: NodeDevices) -> None:
        """Count `devices` of `node` in the summaries."""
        free = devices.free_count()
        while len(self.buckets) <= free:
            self.buckets.append([])
        insort(self.buckets[free], node)
        self.free += free
        self.used_milli += sum(devices.used_milli)
        if any(0 < used < WHOLE for used in devices.used_milli):
            insort(self.partial, node)

    def copy(self) -> FlavorIndex:
        """An independent copy."""
        other = FlavorIndex()
        other.nodes, other.total, other.free = self.nodes, self.total, self.free
        other.used_milli = self.used_milli
        other.buckets = [list(b) for b in self.buckets]
        other.partial = list(self.partial)
        return other

    def leave(self, node: int, devices: NodeDevices) -> None:
        """Remove `devices` of `node` from the summaries."""
        free = devices.free_count()
        _discard(self.buckets[free], node)
        self.free -= free
        self.used_milli -= sum(devices.used_milli)
        _discard(self.partial, node)

    def largest_free(self) -> int:
        """Most free whole devices on one node."""
        return next((k for k in range(len(self.buckets) - 1, 0, -1) if self.buckets[k]), 0)

    def nodes_with(self, at_least: int, *, fullest_first: bool = True) -> Iterator[int]:
        """Nodes with at least `at_least` free devices, by free count then index."""
        counts = range(max(at_least, 1), len(self.buckets))
        for k in counts if fullest_first else reversed(counts):
            yield from self.buckets[k]


def _discard(ordered: list[int], value: int) -> None:
    at = bisect_left(ordered, value)
    if at < len(ordered) and ordered[at] == value:
        del ordered[at]


class ClusterState:
    """Free capacity of one cluster in this cycle, with per-flavor indexes and caches."""

    def __init__(self, cluster: Cluster, order: int, versions: Iterator[int]) -> None:
        self.cluster = cluster
        self.name = cluster.name
        self.order = order  # position in the snapshot: the final tie-break
        self.nodes = [NodeState(i, node) for i, node in enumerate(cluster.nodes)]
        self.owned: set[int] = set(range(len(self.nodes)))  # node states no clone shares
        self.node_index = {node.name: i for i, node in enumerate(cluster.nodes)}
        self.ready_nodes = [n.index for n in self.nodes if n.node.ready]
        self.cpu_nodes = [i for i in self.ready_nodes if not self.nodes[i].node.devices]
        self.cpu_total = sum(self.nodes[i].node.cpu_milli for i in self.ready_nodes)
        self.cpu_free = sum(self.nodes[i].cpu_free for i in self.ready_nodes)
        self.flavors: dict[str, FlavorIndex] = {}
        for n in self.nodes:
            for model, devices in n.devices.items():
                index = self.flavors.setdefault(model, FlavorIndex())
                if n.node.ready:
                    index.nodes.append(n.index)
                    index.total += devices.size
                    index.enter(n.index, devices)
        self._versions = versions
        self.version = next(versions)  # changes with any change in the cluster
        # per flavor: changes when a node carrying it changes; "" changes with any node
        self.flavor_versions: dict[str, int] = dict.fromkeys((*self.flavors, ""), self.version)
        self.cache: dict[Hashable, Any] = {}  # valid for this version only
        self.fit_cache: dict[Hashable, Any] = {}  # keys carry the flavor versions they rely on
        self.static_cache: dict[Hashable, Any] = {}  # facts that usage does not change

    def clone(self, order: int, versions: Iterator[int]) -> ClusterState:
        """A fresh copy of this state for a new cycle: usage, static facts and their cache, no
        usage-dependent caches, new versions."""
        other = ClusterState.__new__(ClusterState)
        other.cluster, other.name, other.order = self.cluster, self.name, order
        other.nodes = list(self.nodes)  # node states are copied before their first change
        other.owned = set()
        other.node_index, other.ready_nodes, other.cpu_nodes = (
            self.node_index,
            self.ready_nodes,
            self.cpu_nodes,
        )
        other.cpu_total, other.cpu_free = self.cpu_total, self.cpu_free
        other.flavors = {m: f.copy() for m, f in self.flavors.items()}
        other._versions = versions
        other.version = next(versions)
        other.flavor_versions = dict.fromkeys(self.flavor_versions, other.version)
        other.cache, other.fit_cache = {}, {}
        other.static_cache = self.static_cache  # shared: the static facts are the same
        return other

    def same_static(self, cluster: Cluster) -> bool:
        """Whether `cluster` differs from this state's cluster in node usage at most."""
        old = self.cluster.nodes
        return len(old) == len(cluster.nodes) and all(
            a is b or static_facts(a) == static_facts(b)
            for a, b in zip(old, cluster.nodes, strict=True)
        )

    def reset(self, cluster: Cluster, nodes: Iterable[int]) -> None:
        """Take `cluster`'s nodes (same static facts, `same_static`), with only their
        reported usage on the nodes numbered `nodes`."""
        for i in nodes:
            n, node = self.nodes[i], cluster.nodes[i]
            fresh = NodeState(i, node)
            if node.ready:
                self.cpu_free += fresh.cpu_free - n.cpu_free
                for model, devices in n.devices.items():
                    self.flavors[model].leave(i, devices)
                for model, devices in fresh.devices.items():
                    self.flavors[model].enter(i, devices)
            self.nodes[i] = fresh
            self.owned.add(i)
        self.cluster = cluster

    def _own(self, i: int) -> NodeState:
        """Node `i`'s state, copied first if it is still shared with another cluster state."""
        n = self.nodes[i]
        if i not in self.owned:
            n = self.nodes[i] = n.copy()
            self.owned.add(i)
        return n

    def take(self, usage: Usage) -> None:
        """Apply one replica's usage; raises `DeviceConflict` (changing nothing) if not free."""
        n = self._own(usage.node)
        if usage.request is not None:
            before = n.devices[usage.model]
            after = allocate_devices(before, usage.request, usage.devices)
            self._swap(n, usage.model, before, after)
        n.cpu_free -= usage.cpu_milli
        n.memory_free -= usage.memory_mib
        n.pods_free -= usage.pods
        if n.node.ready:
            self.cpu_free -= usage.cpu_milli
        self._touch(n)

    def give(self, usage: Usage) -> None:
        """Undo `take(usage)` exactly; raises `DeviceConflict` (changing nothing) if not held."""
        n = self._own(usage.node)
        if usage.request is not None:
            before = n.devices[usage.model]
            after = release_devices(before, usage.request, usage.devices)
            self._swap(n, usage.model, before, after)
        n.cpu_free += usage.cpu_milli
        n.memory_free += usage.memory_mib
        n.pods_free += usage.pods
        if n.node.ready:
            self.cpu_free += usage.cpu_milli
        self._touch(n)

    def take_all(self, usages: list[Usage], *, skip_conflicts: bool = False) -> list[Usage]:
        """`take` each usage; returns those taken. A conflict skips the usage with
        `skip_conflicts`, else gives back what was taken and raises `DeviceConflict`."""
        taken: list[Usage] = []
        for usage in usages:
            try:
                self.take(usage)
            except DeviceConflict:
                if skip_conflicts:
                    continue
                self.give_all(taken)
                raise
            taken.append(usage)
        return taken

    def give_all(self, usages: list[Usage]) -> None:
        """Undo `take_all(usages)`."""
        for usage in reversed(usages):
            self.give(usage)

    def _swap(self, n: NodeState, model: str, before: NodeDevices, after: NodeDevices) -> None:
        index = self.flavors[model]
        tracked = n.node.ready
        if tracked:
            index.leave(n.index, before)
        n.devices[model] = after
        if tracked:
            index.enter(n.index, after)

    def _touch(self, node: NodeState) -> None:
        self.version = next(self._versions)
        self.cache = {}
        versions = self.flavor_versions
        for model in (*node.devices, ""):
            versions[model] = self.version
        if len(self.fit_cache) > FIT_CACHE_LIMIT:
            self.fit_cache.clear()

    def versions_of(self, flavors: Iterable[str]) -> tuple[int, ...]:
        """The versions of `flavors` ("" for any node), for cache keys."""
        return tuple(self.flavor_versions.get(f, 0) for f in flavors)

    def usages(self, placement: Placement) -> list[Usage]:
        """The node usage of a placement's known replicas on this cluster."""
        result = []
        for replica in placement.replicas:
            node = self.node_index.get(replica.node)
            if node is None:
                continue
            task = placement.job.tasks[replica.task]
            option = placement.option(replica.task)
            result.append(
                Usage(
                    node,
                    task.cpu_milli,
                    task.memory_mib,
                    option.flavor if option else "",
                    option.request if option and replica.devices else None,
                    replica.devices if option else (),
                )
            )
        return result

    def fingerprint(self) -> tuple[Hashable, ...]:
        """All usage of the cluster as one comparable value (for tests)."""
        return tuple(
            (n.cpu_free, n.memory_free, n.pods_free, tuple(sorted(n.devices.items())))
            for n in self.nodes
        )


def static_facts(node: Node) -> tuple[Hashable, ...]:
    """What a node is, apart from its usage."""
    return (
        node.name,
        node.cpu_milli,
        node.memory_mib,
        node.pods,
        node.taints,
        node.ready,
        tuple((d.model, d.memory_mib, d.healthy, d.topology, d.sharing) for d in node.devices),
    )


class HeldBase:
    """The last state built for a cluster name: its inventory with reservations held on it.

    Each cycle holds every reservation (placements the cluster does not report yet) on top of
    the cluster's inventory, in snapshot order, skipping a usage that collides with what is
    already there; most reservations are the same objects as in the last cycle. `of` derives
    the new state from the last one: it gives back the holds that are gone and takes the new
    ones. Usages on different nodes never interact, and where every usage held on a node fits
    the order they were taken in does not matter. So only *dirty* nodes are built again from
    their inventory, holding in snapshot order: those whose usage the cluster reports changed,
    those where a usage was skipped (collided: there the order decides, and it may change
    between snapshots), and those where a new hold collides. The result equals holding them
    all on a fresh state.
    """

    __slots__ = ("collided", "holds", "on_node", "state", "taken", "taken_of")

    def __init__(self, cluster: Cluster, reservations: list[Placement]) -> None:
        self.state = ClusterState(cluster, 0, itertools.count())
        # by id of the reservation: it, its usages, and whether each was taken
        self.holds: dict[int, tuple[Placement, list[Usage], list[bool]]] = {}
        self.taken_of: dict[int, list[Usage]] = {}  # by id of the reservation: usages taken
        self.on_node: dict[int, set[int]] = {}  # by node: ids of reservations holding there
        self.taken: list[list[Usage]] = []  # per reservation of the last build, in order
        self.collided: set[int] = set()  # nodes where a usage was skipped
        for reservation in reservations:  # one listed twice: its second copy collides
            key = id(reservation)
            usages = self.state.usages(reservation)
            self._hold(key, reservation, usages, [self._take(u) for u in usages])
            self.taken.append(self.taken_of[key])

    @classmethod
    def of(cls, cluster: Cluster, reservations: list[Placement]) -> HeldBase:
        """`cluster` with `reservations` held (in their order, colliding usages skipped),
        derived from the last base of its name when that gives the same state."""
        base = _BASES.get(cluster.name)
        if base is None or not base._follow(cluster, reservations):
            base = cls(cluster, reservations)
            if len(_BASES) >= BASES_LIMIT and cluster.name not in _BASES:
                _BASES.pop(next(iter(_BASES)))
            _BASES[cluster.name] = base
        return base

    def _take(self, usage: Usage) -> bool:
        """Take one usage, or note its node collided."""
        try:
            self.state.take(usage)
        except DeviceConflict:
            self.collided.add(usage.node)
            return False
        return True

    def _hold(
        self, key: int, reservation: Placement, usages: list[Usage], flags: list[bool]
    ) -> None:
        """Record a reservation's usages and which of them were taken."""
        self.holds[key] = (reservation, usages, flags)
        self.taken_of[key] = [u for u, taken in zip(usages, flags, strict=True) if taken]
        for usage in usages:
            self.on_node.setdefault(usage.node, set()).add(key)

    def _drop(self, key: int) -> tuple[list[Usage], list[bool]]:
        """Forget a reservation; its usages and which of them were taken."""
        _, usages, flags = self.holds.pop(key)
        del self.taken_of[key]
        for node in {u.node for u in usages}:
            keys = self.on_node[node]
            keys.discard(key)
            if not keys:
                del self.on_node[node]
        return usages, flags

    def _follow(self, cluster: Cluster, reservations: list[Placement]) -> bool:
        """Bring this base to `cluster` and `reservations`; False when it cannot (another
        static cluster, a reservation listed twice), then this base is to be discarded."""
        state = self.state
        if state.cluster is not cluster and not state.same_static(cluster):
            return False
        wanted = {id(r): r for r in reservations}
        if len(wanted) != len(reservations) or len(self.holds) != len(self.taken):
            return False
        # collided nodes are built again every cycle: the order of their holds decides
        dirty = self.collided | {
            n.index
            for n, node in zip(state.nodes, cluster.nodes, strict=True)
            if n.node is not node
        }
        for key in self.holds.keys() - wanted.keys():
            usages, flags = self._drop(key)
            for usage, taken in zip(usages, flags, strict=True):
                if taken and usage.node not in dirty:
                    state.give(usage)
        for key, reservation in wanted.items():
            if key in self.holds:
                continue
            usages = state.usages(reservation)
            flags = []
            for usage in usages:
                fits = usage.node not in dirty and self._take(usage)
                if not fits:
                    dirty.add(usage.node)
                flags.append(fits)
            self._hold(key, reservation, usages, flags)
        self._rebuild(cluster, reservations, dirty)
        self.taken = [self.taken_of[id(r)] for r in reservations]
        return True

    def _rebuild(self, cluster: Cluster, reservations: list[Placement], dirty: set[int]) -> None:
        """Take `cluster`, building the `dirty` nodes again from its inventory, holding what
        the reservations hold there in their order, colliding usages skipped."""
        self.state.reset(cluster, dirty)
        if not dirty:
            return
        self.collided -= dirty
        there = set().union(*(self.on_node.get(n, ()) for n in dirty))
        for reservation in reservations:
            key = id(reservation)
            if key not in there:
                continue
            _, usages, flags = self.holds[key]
            for i, usage in enumerate(usages):
                if usage.node in dirty:
                    flags[i] = self._take(usage)
            self.taken_of[key] = [u for u, taken in zip(usages, flags, strict=True) if taken]


BASES_LIMIT = 256  # clusters whose last state is kept to derive the next cycle's from
_BASES: dict[str, HeldBase] = {}  # by cluster name: the last snapshot's, reservations held
_BASES_LOCK = threading.Lock()  # a base changes in place: one state is derived at a time


class State:
    """Working state of one cycle: clusters, quota usage, placements; changes can be trials."""

    def __init__(self, snapshot: Snapshot) -> None:
        versions = itertools.count()
        holding: dict[str, list[Placement]] = {c.name: [] for c in snapshot.clusters}
        for reservation in snapshot.reservations:
            if reservation.cluster in holding:
                holding[reservation.cluster].append(reservation)
        with _BASES_LOCK:  # the API's threads build states at once (fail-fast checks)
            bases = {c.name: HeldBase.of(c, holding[c.name]) for c in snapshot.clusters}
            self.clusters = {
                name: base.state.clone(i, versions) for i, (name, base) in enumerate(bases.items())
            }
            for base in bases.values():
                base.state.owned = set()  # from now on shared with the clone made from it
            taken = {name: iter(base.taken) for name, base in bases.items()}
            short = {  # per reservation: a usage of it collided (read under the lock)
                name: iter([not all(base.holds[id(r)][2]) for r in holding[name]])
                for name, base in bases.items()
            }
        self.quota = QuotaLedger(snapshot.queues)
        # the running placements, indexed and counted; the state's changes keep it so
        self.running = Running.of(snapshot.placements)
        self.placements = self.running.placements  # by job id
        self.by_cluster = self.running.by_cluster
        self.by_queue = self.running.by_queue
        self.by_flavor = self.running.by_flavor  # by (cluster, flavor)
        self.elastic = self.running.elastic  # placements whose replica counts may change
        # per cluster: how many preemptible placements there are of each priority
        self.preemptible = self.running.preemptible
        self.preempting: set[str] = set(snapshot.preempting)
        self.pinned: set[str] = set()  # placed jobs a reservation counts on: never victims
        self.fresh: set[str] = set()  # placed in this cycle
        self.held: dict[str, list[tuple[str, Usage]]] = {}  # reservations by holding job id
        # jobs whose held capacity is partly still in use (their victims, or the replicas a
        # shrink took from an elastic job, have not left yet)
        self.awaiting: set[str] = set()
        self._queues_of: dict[str, list[str]] | None = None  # by tenant (`runs_there`)
        self.memo: dict[Hashable, Any] = {}  # results later jobs of this cycle may reuse
        self._undo: list[list[Callable[[], None]]] = []
        for queue, amounts in self.running.demand.items():  # what `_account` charges
            self.quota.charge(queue, amounts)
        for reservation in snapshot.reservations:  # what `hold` would have recorded
            if reservation.cluster in taken:
                held = self.held.setdefault(reservation.job.id, [])
                held.extend((reservation.cluster, u) for u in next(taken[reservation.cluster]))
                if next(short[reservation.cluster]):
                    self.awaiting.add(reservation.job.id)

    # --- trials ----------------------------------------------------------------------------

    @contextmanager
    def trial(self) -> Iterator[Trial]:
        """Log every change made inside; undo them on exit unless `keep()` was called.

        Undoing also gives every cluster back its version and cache (and the quota ledger its
        version): the state is exactly what it was, so what was cached about it holds again.
        """
        log: list[Callable[[], None]] = []
        self._undo.append(log)
        marker = Trial()
        versions = [
            (c, c.version, c.cache, dict(c.flavor_versions)) for c in self.clusters.values()
        ]
        quota_version = self.quota.version
        try:
            yield marker
        finally:
            self._undo.pop()
            if marker.kept and self._undo:
                self._undo[-1].extend(log)
            elif not marker.kept:
                for undo in reversed(log):
                    undo()
                for cluster, version, cache, flavor_versions in versions:
                    cluster.version, cluster.cache = version, cache
                    cluster.flavor_versions = flavor_versions
                self.quota.version = quota_version

    def _log(self, undo: Callable[[], None]) -> None:
        if self._undo:
            self._undo[-1].append(undo)

    def on_undo(self, undo: Callable[[], None]) -> None:
        """Call `undo` if the innermost open trial is undone (for state kept outside)."""
        self._log(undo)

    # --- changes ---------------------------------------------------------------------------

    def place(self, placement: Placement) -> None:
        """Add a new placement: charge quota and take its replicas' node usage. Jobs placed
        in this cycle are `fresh`: never preemption victims in the same cycle."""
        cluster = self.clusters[placement.cluster]
        taken = cluster.take_all(cluster.usages(placement))
        self._account(placement, 1)
        self.fresh.add(placement.job.id)

        def undo() -> None:
            self.fresh.discard(placement.job.id)
            self._remove(placement, taken)

        self._log(undo)

    def evict(self, placement: Placement) -> list[Usage]:
        """Remove a placement: refund quota and free what its replicas hold on their nodes.

        Returns the usage freed, which `restore` takes back.
        """
        given = self._free(placement)
        self._account(placement, -1)
        self._log(lambda: self._add(placement, given))
        return given

    def vacate(self, placement: Placement) -> None:
        """Free what a placement's replicas hold on their nodes, nothing else (its quota, the
        indexes and its preemption candidacy stay): capacity as it will be once it ended."""
        cluster, given = self.clusters[placement.cluster], self._free(placement)

        def undo() -> None:
            cluster.take_all(given)

        self._log(undo)

    def resize(self, before: Placement, after: Placement) -> None:
        """Replace a placement by the same job holding other replica counts
        (`Placement.resized`): quota follows the replicas held, replicas that leave free what
        they hold on their nodes and replicas that join take theirs."""
        cluster = self.clusters[before.cluster]
        given = self._free(replace(before, replicas=before.beyond(after)))
        taken = cluster.take_all(cluster.usages(replace(after, replicas=after.beyond(before))))
        self._account(before, -1)
        self._account(after, 1)

        def undo() -> None:
            self._account(after, -1)
            self._account(before, 1)
            cluster.give_all(taken)
            cluster.take_all(given)

        self._log(undo)

    def _free(self, placement: Placement) -> list[Usage]:
        cluster = self.clusters[placement.cluster]
        given = []
        for usage in cluster.usages(placement):
            try:
                cluster.give(usage)
            except DeviceConflict:  # the cluster does not report these devices as used
                usage = Usage(usage.node, usage.cpu_milli, usage.memory_mib)
                cluster.give(usage)
            given.append(usage)
        return given

    def restore(self, placement: Placement, given: list[Usage]) -> None:
        """Undo `evict(placement)`, which returned `given`."""
        self._add(placement, given)
        self._log(lambda: self._remove(placement, given))

    def _add(self, placement: Placement, given: list[Usage]) -> None:
        self._account(placement, 1)
        self.clusters[placement.cluster].take_all(given)

    def _remove(self, placement: Placement, given: list[Usage]) -> None:
        self._account(placement, -1)
        self.clusters[placement.cluster].give_all(given)

    def hold(self, reservation: Placement) -> None:
        """Hold capacity for `reservation.job` (replicas whose devices are taken are skipped)."""
        cluster = self.clusters.get(reservation.cluster)
        if cluster is None:
            return
        taken = cluster.take_all(cluster.usages(reservation), skip_conflicts=True)
        held = [(cluster.name, u) for u in taken]
        had = reservation.job.id in self.held
        self.held.setdefault(reservation.job.id, []).extend(held)
        self._log(lambda: self._unhold(reservation.job.id, held, had))

    def unhold(self, job_id: str) -> None:
        """Free the capacity held for `job_id` (so that job itself may use it). A hold of
        nothing (all it was promised is taken) still counts: undoing restores it."""
        if job_id not in self.held:
            return
        held = self.held.pop(job_id)
        for cluster, usage in held:
            self.clusters[cluster].give(usage)
        self._log(lambda: self._rehold(job_id, held))

    def take_free(self, cluster: str, usages: list[Usage]) -> list[Usage]:
        """Take the usages whose devices are free (the others are skipped); returns those."""
        state = self.clusters[cluster]
        taken = state.take_all(usages, skip_conflicts=True)
        self._log(lambda: state.give_all(taken))
        return taken

    def give_back(self, cluster: str, usages: list[Usage]) -> None:
        """Undo `take_free`, which returned `usages`."""
        state = self.clusters[cluster]
        state.give_all(usages)

        def undo() -> None:
            state.take_all(usages)

        self._log(undo)

    def mark_preempting(self, job_id: str) -> None:
        """Record that a placed job is being evicted (not a victim candidate any more)."""
        self.preempting.add(job_id)
        self._log(lambda: self.preempting.discard(job_id))

    # --- helpers ---------------------------------------------------------------------------

    def _account(self, placement: Placement, sign: int) -> None:
        job = placement.job
        self.quota.charge(job.queue, demand(job, options(placement)), sign)
        if sign > 0:
            self.running.enter(placement)
        else:
            self.running.leave(placement)

    def runs_there(self, cluster: str, queue: str) -> tuple[bool, bool]:
        """Whether `cluster` runs placements of `queue`, and of its queue's tenant."""
        where = self.running.where
        if where.get((cluster, queue), 0) > 0:
            return True, True
        tenant = self.tenant(queue)
        if self._queues_of is None:
            self._queues_of = {}
            for q in self.quota.queues.values():
                self._queues_of.setdefault(q.tenant, []).append(q.name)
        if tenant:
            same = self._queues_of.get(tenant, ())
            return False, any(where.get((cluster, q), 0) > 0 for q in same)
        # no tenant known: like every queue without one (rare, so found by a scan)
        return False, any(
            n > 0 and c == cluster and not self.tenant(q) for (c, q), n in where.items()
        )

    def any_preemptible_below(self, cluster: str, priority: int) -> bool:
        """Whether `cluster` runs a preemptible placement of priority lower than `priority`."""
        return any(n > 0 and p < priority for p, n in self.preemptible.get(cluster, {}).items())

    def tenant(self, queue: str) -> str:
        """Tenant of a queue ("" if unknown)."""
        q = self.quota.queues.get(queue)
        return q.tenant if q is not None else ""

    def _unhold(self, job_id: str, held: list[tuple[str, Usage]], had: bool) -> None:
        for cluster, usage in reversed(held):
            self.clusters[cluster].give(usage)
        remaining = self.held.get(job_id, [])
        del remaining[len(remaining) - len(held) :]
        if not had:
            self.held.pop(job_id, None)

    def _rehold(self, job_id: str, held: list[tuple[str, Usage]]) -> None:
        for cluster, usage in held:
            self.clusters[cluster].take(usage)
        self.held[job_id] = held

    def fingerprint(self) -> tuple[Hashable, ...]:
        """All usage, placements, indexes, counts and holds as one comparable value (for
        tests; a count or charge of zero is the same as none)."""
        return (
            tuple(c.fingerprint() for c in self.clusters.values()),
            _counted(self.quota.usage),
            _indexed({"": self.placements}),
            _indexed(self.by_cluster),
            _indexed(self.by_queue),
            _indexed(self.by_flavor),
            _indexed({"": self.elastic}),
            _counted(self.preemptible),
            tuple(sorted((k, n) for k, n in self.running.where.items() if n)),
            tuple(sorted(self.preempting)),
            tuple(sorted(self.fresh)),
            tuple(sorted((j, tuple(h)) for j, h in self.held.items())),
        )


def _indexed(index: Mapping[Any, Mapping[str, Placement]]) -> tuple[Hashable, ...]:
    """An index of placements by key and job id, comparable (placements by identity)."""
    return tuple(
        sorted((k, tuple(sorted((j, id(p)) for j, p in v.items()))) for k, v in index.items() if v)
    )


def _counted(counts: Mapping[Any, Mapping[Any, int]]) -> tuple[Hashable, ...]:
    """Counts by key, comparable, zeros left out."""
    found = ((k, tuple(sorted((x, n) for x, n in v.items() if n))) for k, v in counts.items())
    return tuple(sorted((k, v) for k, v in found if v))


class Trial:
    """Handle of an open trial: `keep()` makes its changes stay."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept = False

    def keep(self) -> None:
        """Keep the changes made in this trial (they join the enclosing trial, if any)."""
        self.kept = True
