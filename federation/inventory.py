"""Stored inventory as the scheduling core's nodes (pure, catalog-driven).

The hub's loop and the submission check build the core's `Node` and `NodeDevices` here, with
the catalog's topology and sharing rules of each model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from federation.catalog import Catalog
from federation.scheduling.devices import NodeDevices
from federation.scheduling.model import Node, Taint


@dataclass(frozen=True)
class DeviceRow:
    """One stored device."""

    flavor: str
    index: int
    memory_mib: int
    healthy: bool
    used_milli: int
    used_memory_mib: int
    utilization: float | None = None  # live, from the device's exporter


def node_devices(
    catalog: Catalog, labels: Mapping[str, str], rows: Iterable[DeviceRow]
) -> tuple[NodeDevices, ...]:
    """A node's stored devices grouped by flavor, with the catalog's topology and sharing rules.

    Flavors the catalog does not know are left out: the core cannot place on them.
    """
    by_flavor: dict[str, list[DeviceRow]] = {}
    for row in rows:
        by_flavor.setdefault(row.flavor, []).append(row)
    out = []
    for flavor, found in sorted(by_flavor.items()):
        model = catalog.get(flavor)
        if model is None:
            continue
        found.sort(key=lambda r: r.index)
        out.append(
            NodeDevices(
                model=model.key,
                memory_mib=tuple(r.memory_mib for r in found),
                used_milli=tuple(r.used_milli for r in found),
                used_memory_mib=tuple(r.used_memory_mib for r in found),
                healthy=tuple(r.healthy for r in found),
                load=tuple(r.utilization for r in found),
                topology=model.topology_for(labels, len(found)),
                sharing=model.sharing,
            )
        )
    return tuple(out)


def core_node(catalog: Catalog, row: Mapping[str, Any], device_rows: Iterable[DeviceRow]) -> Node:
    """A stored node (a `nodes` row as a mapping) as the core's `Node`."""
    labels = dict(row["labels"])
    return Node(
        name=row["name"],
        cpu_milli=int(row["cpu_milli"]),
        memory_mib=int(row["memory_mib"]),
        pods=int(row["pods"]),
        used_cpu_milli=int(row["cpu_milli_used"]),
        used_memory_mib=int(row["memory_mib_used"]),
        used_pods=int(row["pods_used"]),
        devices=node_devices(catalog, labels, device_rows),
        labels=MappingProxyType(labels),
        taints=tuple(
            Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in row["taints"]
        ),
        ready=bool(row["ready"]) and not bool(row["unschedulable"]),
    )
