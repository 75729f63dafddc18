"""Nodes as the hub sees them: allocatable, what every pod on them uses, and devices.

Pure functions over the API's JSON. A node's accelerators are resolved through the catalog
once per node change (`node_view`); occupancy is computed from the pods bound to it
(`node_info`):

- devices are numbered 0..n-1 per model, n from the node's capacity; the ones beyond the
  allocatable count are unhealthy (a device plugin withdraws sick devices from allocatable);
- a pod with the extender's `suanpan.io/devices` annotation holds exactly those indices,
  whole devices (1000 milli, all their memory) or one share (`suanpan.io/device-request`
  milli and memoryMib);
- any other pod holding devices (not placed by the extender) takes, in name order, the
  lowest indices still entirely free, as many as it requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from cluster_agents.kube.pods import PodInfo
from federation.catalog import Catalog, ResolvedDevices, parse_quantity, resolve_node
from federation.scheduling.devices import WHOLE
from federation.wire.agent import DeviceInfo, NodeInfo, Taint

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class NodeModel:
    """A node's devices of one accelerator model."""

    key: str  # catalog key
    targets: frozenset[str]  # what a pod's demand may name: the key or a resource of the model
    count: int  # devices the node has (capacity)
    healthy: int  # devices it offers (allocatable); indices >= healthy are unhealthy
    memory_mib: int  # per device


@dataclass(frozen=True, slots=True)
class NodeView:
    """The occupancy-independent facts of a node."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    ready: bool
    unschedulable: bool
    cpu_milli: int
    memory_mib: int
    pods: int
    models: tuple[NodeModel, ...]


def _amount(resources: Mapping[str, str], name: str, scale: int = 1) -> int:
    """A quantity from a resource list as an int (`scale` 1000: milli), 0 if absent or bad."""
    try:
        return int(parse_quantity(resources[name]) * scale) if name in resources else 0
    except ValueError:
        return 0


def _resolved(
    catalog: Catalog, meta: Mapping[str, Any], resources: Mapping[str, str]
) -> dict[str, ResolvedDevices]:
    found = resolve_node(
        catalog, meta.get("labels") or {}, meta.get("annotations") or {}, resources
    )
    return {r.model.key: r for r in found if isinstance(r, ResolvedDevices) and r.count}


def _models(
    catalog: Catalog, meta: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[NodeModel, ...]:
    allocatable = status.get("allocatable") or {}
    offered = _resolved(catalog, meta, allocatable)
    present = _resolved(catalog, meta, {**allocatable, **(status.get("capacity") or {})})
    models = []
    for key in sorted(offered.keys() | present.keys()):
        r = present.get(key) or offered[key]
        healthy = offered[key].count if key in offered else 0
        share = r.model.sharing.share_resource
        models.append(
            NodeModel(
                key=key,
                targets=frozenset(
                    {key, r.resource, *r.model.resources, *([share] if share else [])}
                ),
                count=max(r.count, healthy),
                healthy=healthy,
                memory_mib=r.memory_mib,
            )
        )
    return tuple(models)


def _taint(raw: Mapping[str, Any]) -> Taint | None:
    """A taint the hub can take (a known effect, a key within the wire's limits), else None."""
    try:
        return Taint(key=raw.get("key", ""), value=raw.get("value") or "", effect=raw.get("effect"))
    except ValidationError:
        return None


def node_view(catalog: Catalog, node: Mapping[str, Any]) -> NodeView:
    """Parse a v1 Node."""
    meta, spec, status = (
        node.get("metadata") or {},
        node.get("spec") or {},
        node.get("status") or {},
    )
    allocatable = status.get("allocatable") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    return NodeView(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        taints=tuple(t for t in map(_taint, spec.get("taints") or ()) if t is not None),
        ready=conditions.get("Ready") == "True",
        unschedulable=bool(spec.get("unschedulable")),
        cpu_milli=_amount(allocatable, "cpu", 1000),
        memory_mib=_amount(allocatable, "memory") // MIB,
        pods=_amount(allocatable, "pods"),
        models=_models(catalog, meta, status),
    )


def _model(view: NodeView, pod: PodInfo) -> NodeModel | None:
    """The node's model a pod's device demand lands on."""
    if pod.demand is None:
        return None
    return next((m for m in view.models if pod.demand.target in m.targets), None)


def _devices(view: NodeView, pods: list[PodInfo]) -> list[DeviceInfo]:
    milli = {m.key: [0] * m.count for m in view.models}
    memory = {m.key: [0] * m.count for m in view.models}
    unplaced: list[tuple[NodeModel, int]] = []
    for pod in pods:
        model = _model(view, pod)
        if model is None or pod.demand is None:
            continue
        request = pod.demand.request
        if pod.devices is None:
            unplaced.append((model, request.count))
            continue
        for i in pod.devices:
            if i < model.count:
                milli[model.key][i] += request.milli
                memory[model.key][i] += request.memory_mib if request.is_share else model.memory_mib
    for model, count in unplaced:
        free = [i for i, used in enumerate(milli[model.key]) if not used][:count]
        for i in free:
            milli[model.key][i] = WHOLE
            memory[model.key][i] = model.memory_mib
    return [
        DeviceInfo(
            flavor=m.key,
            index=i,
            memory_mib=m.memory_mib,
            healthy=i < m.healthy,
            used_milli=min(WHOLE, milli[m.key][i]),
            used_memory_mib=memory[m.key][i],
        )
        for m in view.models
        for i in range(m.count)
    ]


def node_info(view: NodeView, pods: Iterable[PodInfo]) -> NodeInfo:
    """The node with what its non-terminal pods (of anyone) use."""
    active = sorted(
        (p for p in pods if p.active and p.node == view.name), key=lambda p: (p.namespace, p.name)
    )
    return NodeInfo(
        name=view.name,
        labels=dict(view.labels),
        taints=list(view.taints),
        ready=view.ready,
        unschedulable=view.unschedulable,
        cpu_milli=view.cpu_milli,
        memory_mib=view.memory_mib,
        pods=view.pods,
        used_cpu_milli=sum(p.cpu_milli for p in active),
        used_memory_mib=sum(p.memory_mib for p in active),
        used_pods=len(active),
        devices=_devices(view, active),
    )
