"""A node's accelerator inventory as the catalog resolver sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster_agents.kube.pods import MIB
from federation.catalog import Catalog, ResolvedDevices, parse_quantity, resolve_node
from federation.scheduling.devices import NodeDevices


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node: its devices per model and its size.

    As the agent reports nodes to the hub (`cluster_agents.backends.k8s_nodes`): a model's
    devices are numbered 0..n-1 with n from the capacity, and those at or beyond the
    allocatable count are unhealthy (device plugins withdraw sick devices from allocatable).
    """

    name: str
    devices: tuple[ResolvedDevices, ...] = ()  # count = capacity
    healthy: tuple[int, ...] = ()  # per entry of `devices`: the allocatable count
    cpu_milli: int = 0
    memory_mib: int = 0
    _targets: dict[str, ResolvedDevices] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        targets = {r: d for d in reversed(self.devices) for r in d.model.resources}
        targets.update((d.model.key, d) for d in self.devices)
        object.__setattr__(self, "_targets", targets)

    def resolve(self, target: str) -> ResolvedDevices | None:
        """The node's devices a demand's target (model key or resource name) means here."""
        return self._targets.get(target)

    def model(self, key: str) -> ResolvedDevices | None:
        """The node's devices of the model `key`."""
        return self._targets.get(key)

    def empty(self, resolved: ResolvedDevices) -> NodeDevices:
        """The node's devices of one of its models with nothing placed on them."""
        n, healthy = resolved.count, self.healthy[self.devices.index(resolved)]
        return NodeDevices(
            model=resolved.model.key,
            memory_mib=(resolved.memory_mib,) * n,
            used_milli=(0,) * n,
            used_memory_mib=(0,) * n,
            healthy=tuple(i < healthy for i in range(n)),
            topology=resolved.topology,
            sharing=resolved.model.sharing,
        )


def node_info(catalog: Catalog, node: Mapping[str, Any]) -> NodeInfo:
    """Resolve a Node object (JSON) into its inventory."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable: dict[str, str] = status.get("allocatable") or {}
    present = _resolve(catalog, meta, {**allocatable, **(status.get("capacity") or {})})
    offered = _resolve(catalog, meta, allocatable)
    devices = sorted(present.values(), key=lambda r: r.model.key)
    return NodeInfo(
        name=meta.get("name", ""),
        devices=tuple(devices),
        healthy=tuple(
            min(offered[r.model.key].count, r.count) if r.model.key in offered else 0
            for r in devices
        ),
        cpu_milli=_quantity(allocatable.get("cpu"), 1000),
        memory_mib=_quantity(allocatable.get("memory"), 1) // MIB,
    )


def _resolve(
    catalog: Catalog, meta: Mapping[str, Any], resources: Mapping[str, str]
) -> dict[str, ResolvedDevices]:
    found = resolve_node(
        catalog, meta.get("labels") or {}, meta.get("annotations") or {}, resources
    )
    return {r.model.key: r for r in found if isinstance(r, ResolvedDevices) and r.count}


def _quantity(raw: str | None, scale: int) -> int:
    try:
        return int(parse_quantity(raw) * scale) if raw else 0
    except ValueError:
        return 0
