"""Nodes as the hub sees them: allocatable, what every pod on them uses, and devices.

Pure functions over the API's JSON. A node's accelerators are resolved through the catalog
once per node change (`node_view`, with `cluster_agents.kube.occupancy.node_inventory`); the
devices its pods hold come from `cluster_agents.kube.occupancy.occupancy`, the function the
extender filters and binds with, so the hub is told exactly what the extender sees (per model,
devices 0..n-1 with n from the capacity, those beyond the allocatable count unhealthy; a pod
holds the devices the extender wrote into its annotation, any other pod the lowest ones still
entirely free, as many as it requests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from cluster_agents.kube.occupancy import NodeInventory, node_inventory, occupancy, quantity
from cluster_agents.kube.pods import PodInfo
from federation.catalog import Catalog
from federation.wire.agent import DeviceInfo, NodeInfo, Taint, device_infos


@dataclass(frozen=True, slots=True)
class NodeView:
    """The occupancy-independent facts of a node."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    ready: bool
    unschedulable: bool
    pods: int
    inventory: NodeInventory  # devices per model, allocatable CPU and memory


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
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    return NodeView(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        taints=tuple(t for t in map(_taint, spec.get("taints") or ()) if t is not None),
        ready=conditions.get("Ready") == "True",
        unschedulable=bool(spec.get("unschedulable")),
        pods=quantity((status.get("allocatable") or {}).get("pods")),
        inventory=node_inventory(catalog, node),
    )


def _devices(inventory: NodeInventory, pods: list[PodInfo]) -> list[DeviceInfo]:
    found: list[DeviceInfo] = []
    for resolved in inventory.devices:
        found.extend(device_infos(occupancy(inventory, resolved.model.key, pods).devices))
    return found


def node_info(view: NodeView, pods: Iterable[PodInfo]) -> NodeInfo:
    """The node with what its non-terminal pods (of anyone) use."""
    active = [p for p in pods if p.active and p.node == view.name]
    return NodeInfo(
        name=view.name,
        labels=dict(view.labels),
        taints=list(view.taints),
        ready=view.ready,
        unschedulable=view.unschedulable,
        cpu_milli=view.inventory.cpu_milli,
        memory_mib=view.inventory.memory_mib,
        pods=view.pods,
        used_cpu_milli=sum(p.cpu_milli for p in active),
        used_memory_mib=sum(p.memory_mib for p in active),
        used_pods=len(active),
        devices=_devices(view.inventory, active),
    )
