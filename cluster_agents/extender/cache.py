"""The extender's picture of the cluster: nodes, pods and in-flight reservations.

Fed by list+watch (`cluster_agents.extender.kube`); no I/O here. A node's device occupancy is
rebuilt from what holds devices on it by `cluster_agents.kube.occupancy.occupancy`, the
function the agent reports nodes to the hub with, so that hub and extender agree; the
reservations of binds in flight (devices chosen, pod not yet seen bound) hold their devices
on top of the bound pods.

Every change to a node or to what holds devices on it bumps the node's generation; the
occupancy and fit results are memoized per generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cluster_agents.kube.occupancy import (
    NodeInventory,
    Occupancy,
    Placed,
    node_inventory,
    occupancy,
)
from cluster_agents.kube.pods import Demand, PodInfo, pod_info
from federation.catalog import Catalog
from federation.nodeplacement import PodRequest
from federation.scheduling import devices
from federation.scheduling.devices import DeviceRequest, Fit, FitCode, NodeDevices


@dataclass(frozen=True, slots=True)
class Reservation:
    """Devices a bind in flight has chosen for a pod, held until the pod is seen bound."""

    node: str
    model: str
    request: DeviceRequest
    devices: tuple[int, ...]
    cpu_milli: int = 0
    memory_mib: int = 0

    def placed(self) -> Placed:
        """What the reservation holds on its node."""
        request = PodRequest(self.cpu_milli, self.memory_mib, self.request, frozenset({self.model}))
        return Placed(request, self.devices)


MAX_TABLES = 64  # demands (target, request) whose fits on every node are kept
MAX_JOURNAL = 1 << 17  # changes remembered; a table older than that is rebuilt
NOT_CACHED = "node not in the extender's cache yet"


class FitTable:
    """One demand's fit on every cached node, and the nodes where it fits.

    Why a demand does not fit a node *now* takes far longer to work out than whether it fits
    (the largest count that would), and kube-scheduler reads it only when no node fits, so it
    is worked out on first ask (`Cache.fit`); what can never fit is cheap and told at once.
    """

    def __init__(self) -> None:
        self.passed: set[str] = set()
        self.failed: dict[str, str | None] = {}  # INSUFFICIENT: node -> reason (None: not yet)
        self.unresolvable: dict[str, str] = {}  # UNRESOLVABLE: node -> reason
        self.seen = 0  # the cache's changes applied

    def set(self, node: str, ok: bool, never: str | None) -> None:
        """Record on `node` whether the demand fits now, and why it never can (or None)."""
        self.drop(node)
        if ok:
            self.passed.add(node)
        elif never is not None:
            self.unresolvable[node] = never
        else:
            self.failed[node] = None

    def drop(self, node: str) -> None:
        """Forget a node that left."""
        self.passed.discard(node)
        self.failed.pop(node, None)
        self.unresolvable.pop(node, None)


class Cache:
    """Nodes, pods and reservations, with per-node generations and memoized fits."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.nodes: dict[str, NodeInventory] = {}
        self.pods: dict[str, PodInfo] = {}
        self.layout = 0  # grows when the node set or a node's inventory changes
        self.nodes_synced = False
        self.pods_synced = False
        self._node_inputs: dict[str, tuple[Any, ...]] = {}  # what each node was resolved from
        self._on_node: dict[str, dict[str, PodInfo]] = {}
        self._reserved: dict[str, Reservation] = {}
        self._generation: dict[str, int] = {}
        self._occupancy: dict[tuple[str, str], tuple[int, Occupancy]] = {}
        self._journal: list[str] = []  # the node of every change, in order
        self._dropped = 0  # journal entries forgotten (the journal starts at this change)
        self._tables: dict[tuple[str, DeviceRequest], FitTable] = {}

    # --- inputs ------------------------------------------------------------------------------

    def set_node(self, obj: Mapping[str, Any]) -> None:
        """Add or update a node from its JSON (heartbeats, which change none of the inputs of
        the inventory, cost a comparison)."""
        meta = obj.get("metadata") or {}
        inputs = (
            meta.get("labels"),
            meta.get("annotations"),
            (obj.get("status") or {}).get("allocatable"),
        )
        name = meta.get("name", "")
        if self._node_inputs.get(name) == inputs:
            return
        self._node_inputs[name] = inputs
        info = node_inventory(self.catalog, obj)
        if self.nodes.get(info.name) != info:
            self.nodes[info.name] = info
            self.layout += 1
            self._touch(info.name)

    def remove_node(self, name: str) -> None:
        """Forget a deleted node."""
        self._node_inputs.pop(name, None)
        if self.nodes.pop(name, None) is not None:
            self.layout += 1
            self._touch(name)
            for key in [k for k in self._occupancy if k[0] == name]:
                del self._occupancy[key]

    def replace_nodes(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """Make the node set exactly `objs` (after a list)."""
        seen = set()
        for obj in objs:
            self.set_node(obj)
            seen.add((obj.get("metadata") or {}).get("name", ""))
        for name in set(self.nodes) - seen:
            self.remove_node(name)
        self.nodes_synced = True

    def set_pod(self, obj: Mapping[str, Any]) -> None:
        """Add or update a pod from its JSON."""
        info = pod_info(self.catalog, obj)
        old = self.pods.get(info.uid)
        if old == info:
            return
        self._unindex(old)
        self.pods[info.uid] = info
        if info.node:
            self._on_node.setdefault(info.node, {})[info.uid] = info
            self._touch(info.node)
            self.release(info.uid)  # now counted through the pod itself

    def remove_pod(self, uid: str) -> None:
        """Forget a deleted pod (and any reservation for it)."""
        self._unindex(self.pods.pop(uid, None))
        self.release(uid)

    def replace_pods(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """Make the pod set exactly `objs` (after a list)."""
        seen = set()
        for obj in objs:
            self.set_pod(obj)
            seen.add((obj.get("metadata") or {}).get("uid", ""))
        for uid in set(self.pods) - seen:
            self.remove_pod(uid)
        self.pods_synced = True

    def reserve(self, uid: str, reservation: Reservation) -> None:
        """Hold devices for a bind in flight (replacing an older reservation of the pod)."""
        self.release(uid)
        self._reserved[uid] = reservation
        self._touch(reservation.node)

    def release(self, uid: str) -> None:
        """Drop the pod's reservation, if any."""
        reservation = self._reserved.pop(uid, None)
        if reservation is not None:
            self._touch(reservation.node)

    def reservation(self, uid: str) -> Reservation | None:
        """The pod's reservation: a bind in flight, or one done that the watch has not shown."""
        return self._reserved.get(uid)

    @property
    def reservations(self) -> int:
        """Number of binds in flight."""
        return len(self._reserved)

    # --- reads -------------------------------------------------------------------------------

    def generation(self, node: str) -> int:
        """Grows whenever the node, its pods or its reservations change."""
        return self._generation.get(node, 0)

    def occupancy(self, node: str, model: str) -> Occupancy:
        """The node's devices of `model` with everything holding them placed (see module doc)."""
        gen = self.generation(node)
        memo = self._occupancy.get((node, model))
        if memo is not None and memo[0] == gen:
            return memo[1]
        reserved = (
            r.placed() for r in self._reserved.values() if r.node == node and r.model == model
        )
        found = occupancy(self.nodes[node], model, self._on_node.get(node, {}).values(), reserved)
        self._occupancy[(node, model)] = (gen, found)
        return found

    def fit(self, node: str, demand: Demand) -> Fit:
        """Whether the demand fits the node now, and why not (see `fit_table`)."""
        table = self.fit_table(demand)
        if node in table.passed:
            return Fit(FitCode.OK)
        if node in table.unresolvable:
            return Fit(FitCode.UNRESOLVABLE, table.unresolvable[node])
        if node not in table.failed:
            return Fit(FitCode.INSUFFICIENT, NOT_CACHED)
        reason = table.failed[node]
        if reason is None:  # the table is current: the node is as it was when recorded
            reason = table.failed[node] = self._reason(node, demand)
        return Fit(FitCode.INSUFFICIENT, reason)

    def fit_table(self, demand: Demand) -> FitTable:
        """The demand's fit on every node, brought up to date from the change journal.

        A demand seen for the first time costs one `devices.fit` per node; after that only
        nodes changed since its last use are fitted again. Reasons start with the target.
        """
        key = (demand.target, demand.request)
        table = self._tables.pop(key, None)
        changed = self.changed_since(table.seen) if table else None
        if table is None or changed is None:
            if len(self._tables) >= MAX_TABLES:
                del self._tables[next(iter(self._tables))]  # the least recently used
            table = FitTable()
            changed = set(self.nodes)
        for node in changed:
            if node in self.nodes:
                table.set(node, *self._fit_now(node, demand))
            else:
                table.drop(node)
        table.seen = self.changes
        self._tables[key] = table
        return table

    @property
    def changes(self) -> int:
        """How many changes (to a node, its pods or its reservations) happened so far."""
        return self._dropped + len(self._journal)

    def changed_since(self, seen: int) -> set[str] | None:
        """Nodes changed after the first `seen` changes; None if that is too long ago."""
        if seen < self._dropped:
            return None
        return set(self._journal[seen - self._dropped :])

    def demands(self) -> Iterable[Demand]:
        """Device demands of the active pods (the observed workload)."""
        return (p.demand for p in self.pods.values() if p.active and p.demand is not None)

    # --- internals ---------------------------------------------------------------------------

    def _fit_now(self, node: str, demand: Demand) -> tuple[bool, str | None]:
        """Whether `demand` fits `node` now, and why it never can (None: it could)."""
        free = self._devices(node, demand)
        if free is None:
            return False, f"{demand.target}: no such devices on the node"
        if devices.choose(free, demand.request) is not None:
            return True, None
        never = devices.never_fits(free, demand.request)
        return False, None if never is None else f"{demand.target}: {never}"

    def _reason(self, node: str, demand: Demand) -> str:
        """Why `demand`, which could fit `node`, does not fit it now."""
        free = self._devices(node, demand)
        assert free is not None  # else it could never fit
        return f"{demand.target}: {devices.insufficient(free, demand.request)}"

    def _devices(self, node: str, demand: Demand) -> NodeDevices | None:
        """The node's devices that `demand` targets, with what holds them now (None: none)."""
        resolved = self.nodes[node].resolve(demand.target)
        return None if resolved is None else self.occupancy(node, resolved.model.key).devices

    def _touch(self, node: str) -> None:
        self._generation[node] = self.generation(node) + 1
        self._journal.append(node)
        if len(self._journal) > MAX_JOURNAL:
            self._dropped += len(self._journal)
            self._journal.clear()

    def _unindex(self, pod: PodInfo | None) -> None:
        if pod is not None and pod.node:
            self._on_node.get(pod.node, {}).pop(pod.uid, None)
            self._touch(pod.node)
