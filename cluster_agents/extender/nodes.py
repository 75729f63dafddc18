"""A node's accelerator inventory as the catalog resolver sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from federation.catalog import Catalog, ResolvedDevices, parse_quantity, resolve_node
from federation.scheduling.devices import NodeDevices

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node: its devices per model (resolved from labels and allocatable) and its size."""

    name: str
    devices: tuple[ResolvedDevices, ...] = ()
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


def node_info(catalog: Catalog, node: Mapping[str, Any]) -> NodeInfo:
    """Resolve a Node object (JSON) into its inventory."""
    meta = node.get("metadata") or {}
    allocatable: dict[str, str] = (node.get("status") or {}).get("allocatable") or {}
    found = resolve_node(
        catalog, meta.get("labels") or {}, meta.get("annotations") or {}, allocatable
    )
    devices = sorted(
        (r for r in found if isinstance(r, ResolvedDevices)), key=lambda r: r.model.key
    )
    return NodeInfo(
        name=meta.get("name", ""),
        devices=tuple(devices),
        cpu_milli=_quantity(allocatable.get("cpu"), 1000),
        memory_mib=_quantity(allocatable.get("memory"), 1) // MIB,
    )


def empty_devices(resolved: ResolvedDevices) -> NodeDevices:
    """The node's devices of one model with nothing placed on them."""
    n = resolved.count
    return NodeDevices(
        model=resolved.model.key,
        memory_mib=(resolved.memory_mib,) * n,
        used_milli=(0,) * n,
        used_memory_mib=(0,) * n,
        healthy=(True,) * n,
        topology=resolved.topology,
        sharing=resolved.model.sharing,
    )


def _quantity(raw: str | None, scale: int) -> int:
    try:
        return int(parse_quantity(raw) * scale) if raw else 0
    except ValueError:
        return 0
