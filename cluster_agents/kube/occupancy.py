"""A node's accelerators and what holds them: the one occupancy function.

The agent reports nodes to the hub with it (`cluster_agents.backends.k8s_nodes`) and the
extender filters, scores and binds with it (`cluster_agents.extender.cache`), so the hub and
the extender see the same devices in use (DESIGN.md, principle 5).

Inventory (`node_inventory`): the node's extended resources resolved by the catalog
(`federation.catalog.resolve_node`: model, memory, topology); a model's devices are numbered
0..n-1 with n from the capacity, and those at or beyond the allocatable count are unhealthy (a
device plugin withdraws sick devices from allocatable), as are those the agent's telemetry
annotation (`federation.wire.telemetry.ANNOTATION`) names in fatal error; its load bands are the
devices' `load`, which share placement prefers low. Each device's id is what the vendor's
plugin registered on the node (`cluster_agents.kube.allocation.device_ids`).

Occupancy (`occupancy`), from the non-terminal pods bound to the node, in (namespace, name)
order, placed with the device model's own bookkeeping (`federation.scheduling.devices.allocate`):

1. a pod with a `DEVICES` annotation (the extender's choice at bind) holds the named devices
   the node has, healthy or not: its share (`DEVICE_REQUEST` milli and memory; shares add up
   on a device) when it names one device for a share, else those devices whole;
2. reservations the caller passes (the extender's binds in flight) hold their devices alike;
3. every other pod asking for the model's devices (bound by someone else, created with
   `nodeName`, or naming devices an earlier holder has): whole devices, as many as it asks
   for, on the lowest indices still entirely free. Kubernetes does not say which devices the
   kubelet gave it; only the count is real.

A pod asks for a model when its demand's target is the model's key, one of its resources, or
its sharing count resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cluster_agents.kube.allocation import device_ids
from cluster_agents.kube.pods import MIB, PodInfo
from federation.catalog import (
    Catalog,
    DeviceAllocation,
    ResolvedDevices,
    parse_quantity,
    resolve_node,
)
from federation.nodeplacement import PodRequest
from federation.scheduling import devices
from federation.scheduling.devices import DeviceRequest, NodeDevices
from federation.wire.telemetry import ANNOTATION, DeviceMarks, decode_marks


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """One node: its devices per model and its size (allocatable CPU and memory)."""

    name: str
    devices: tuple[ResolvedDevices, ...] = ()  # count = capacity, sorted by model key
    healthy: tuple[int, ...] = ()  # per entry of `devices`: the allocatable count
    ids: tuple[tuple[str, ...], ...] = ()  # per entry of `devices`: each device's plugin id
    marks: tuple[DeviceMarks | None, ...] = ()  # per entry of `devices`: live load and faults
    cpu_milli: int = 0
    memory_mib: int = 0
    _targets: dict[str, ResolvedDevices] = field(init=False, repr=False, compare=False)
    _shared: dict[str, ResolvedDevices] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        targets = {r: d for d in reversed(self.devices) for r in d.model.resources}
        targets.update((d.model.key, d) for d in self.devices)
        object.__setattr__(self, "_targets", targets)
        shared = {
            d.model.sharing.share_resource: d
            for d in reversed(self.devices)
            if d.model.sharing.share_resource
        }
        object.__setattr__(self, "_shared", shared)

    def resolve(self, target: str) -> ResolvedDevices | None:
        """The node's devices a demand's target (model key or resource name) means here."""
        return self._targets.get(target)

    def holding(self, target: str) -> ResolvedDevices | None:
        """The node's devices a pod asking for `target` holds: those `resolve` gives, else the
        model whose sharing count resource `target` is."""
        return self._targets.get(target) or self._shared.get(target)

    def model(self, key: str) -> ResolvedDevices | None:
        """The node's devices of the model `key`."""
        return self._targets.get(key)

    def allocation(
        self, resolved: ResolvedDevices
    ) -> tuple[DeviceAllocation | None, tuple[str, ...]]:
        """How the plugin of one of the node's models is told its devices, and their ids."""
        ids = self.ids[self.devices.index(resolved)]
        return resolved.model.allocation_for(resolved.resource), ids

    def empty(self, resolved: ResolvedDevices) -> NodeDevices:
        """The node's devices of one of its models with nothing placed on them."""
        entry = self.devices.index(resolved)
        n, healthy = resolved.count, self.healthy[entry]
        load, down = (self.marks[entry] if self.marks else None) or ((), frozenset())
        return NodeDevices(
            model=resolved.model.key,
            memory_mib=(resolved.memory_mib,) * n,
            used_milli=(0,) * n,
            used_memory_mib=(0,) * n,
            healthy=tuple(i < healthy and i not in down for i in range(n)),
            load=(*load, *(None,) * n)[:n],
            topology=resolved.topology,
            sharing=resolved.model.sharing,
        )


def node_inventory(catalog: Catalog, node: Mapping[str, Any]) -> NodeInventory:
    """Resolve a Node object (JSON) into its inventory."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable: dict[str, str] = status.get("allocatable") or {}
    present = _resolve(catalog, meta, {**allocatable, **(status.get("capacity") or {})})
    offered = _resolve(catalog, meta, allocatable)
    found = sorted(present.values(), key=lambda r: r.model.key)
    name = meta.get("name", "")
    annotations = meta.get("annotations") or {}
    marks = decode_marks(annotations.get(ANNOTATION))
    return NodeInventory(
        name=name,
        devices=tuple(found),
        ids=tuple(_ids(r, name, annotations) for r in found),
        marks=tuple(marks.get(r.model.key) for r in found),
        healthy=tuple(
            min(offered[r.model.key].count, r.count) if r.model.key in offered else 0 for r in found
        ),
        cpu_milli=quantity(allocatable.get("cpu"), 1000),
        memory_mib=quantity(allocatable.get("memory")) // MIB,
    )


def _ids(resolved: ResolvedDevices, node: str, annotations: Mapping[str, str]) -> tuple[str, ...]:
    allocation = resolved.model.allocation_for(resolved.resource)
    if allocation is None:
        return tuple(map(str, range(resolved.count)))
    return device_ids(allocation, node, annotations, resolved.count)


def quantity(raw: str | None, scale: int = 1) -> int:
    """A resource quantity as an int (`scale` 1000: milli); 0 when absent or malformed."""
    try:
        return int(parse_quantity(raw) * scale) if raw else 0
    except ValueError:
        return 0


def _resolve(
    catalog: Catalog, meta: Mapping[str, Any], resources: Mapping[str, str]
) -> dict[str, ResolvedDevices]:
    found = resolve_node(
        catalog, meta.get("labels") or {}, meta.get("annotations") or {}, resources
    )
    return {r.model.key: r for r in found if isinstance(r, ResolvedDevices) and r.count}


@dataclass(frozen=True, slots=True)
class Placed:
    """What one pod (or reservation) takes on a node: its request and the devices it holds."""

    request: PodRequest
    devices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Occupancy:
    """A node's devices of one model in use, and everything placed on the node."""

    devices: NodeDevices
    placed: tuple[Placed, ...]


def occupancy(
    node: NodeInventory, model: str, pods: Iterable[PodInfo], reserved: Iterable[Placed] = ()
) -> Occupancy:
    """The node's devices of `model` with what holds them (see the module doc).

    `pods` may hold pods of other nodes and finished ones: only the node's non-terminal pods
    count. Every pod counted is in `placed` (with no device when it asks for none of `model`);
    so is every reservation that holds devices. KeyError when the node has no such devices.
    """
    resolved = node.model(model)
    if resolved is None:
        raise KeyError(f"node {node.name} has no {model} devices")
    empty = node.empty(resolved)
    nd = replace(empty, healthy=(True,) * empty.size)  # held devices may have turned sick
    models = frozenset({model})
    placed: list[Placed] = []
    exact: list[tuple[PodRequest, tuple[int, ...]]] = []
    unknown: list[PodRequest] = []
    mine = sorted(
        (p for p in pods if p.active and p.node == node.name), key=lambda p: (p.namespace, p.name)
    )
    for pod in mine:
        demand = pod.demand
        held = node.holding(demand.target) if demand else None
        if demand is None or held is None or held.model.key != model:
            placed.append(Placed(PodRequest(pod.cpu_milli, pod.memory_mib)))
            continue
        req = PodRequest(pod.cpu_milli, pod.memory_mib, demand.request, models)
        named = tuple(i for i in pod.devices or () if i < nd.size)
        if named:
            exact.append((_naming(req, named), named))
        else:
            unknown.append(req)
    exact.extend((r.request, r.devices) for r in reserved)
    for req, held_devices in exact:
        assert req.device is not None
        try:
            nd = devices.allocate(nd, req.device, held_devices)
        except devices.DeviceConflict:
            unknown.append(req)
            continue
        placed.append(Placed(req, held_devices))
    for req in unknown:  # whole devices, on the lowest indices still entirely free
        assert req.device is not None
        free = tuple(i for i in range(nd.size) if nd.is_free(i))[: req.device.count]
        if free:
            whole = DeviceRequest(len(free))
            nd = devices.allocate(nd, whole, free)
            placed.append(Placed(replace(req, device=whole), free))
    return Occupancy(replace(nd, healthy=empty.healthy), tuple(placed))


def _naming(req: PodRequest, named: tuple[int, ...]) -> PodRequest:
    """The request a pod holds on the devices it names: its own when they match its count,
    else those devices whole."""
    assert req.device is not None
    if len(named) == req.device.count:
        return req
    return replace(req, device=DeviceRequest(len(named)))
