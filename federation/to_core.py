"""Stored jobs and inventory as the scheduling core's frozen model (pure, catalog-driven).

The hub's loop and the submission check build the core's `Job`, `Node` and `NodeDevices` here,
so a flavor pattern means the same thing wherever it is expanded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from federation.catalog import Catalog
from federation.demand import cpu_milli, memory_mib
from federation.scheduling.devices import WHOLE, NodeDevices
from federation.scheduling.model import (
    AcceleratorRequest,
    Constraints,
    FlavorOption,
    Job,
    Node,
    Taint,
    Task,
)


class UnknownFlavor(ValueError):
    """A flavor pattern that matches no catalog model (carries the field path)."""

    def __init__(self, path: str, pattern: str) -> None:
        super().__init__(f"{path}: {pattern!r} matches no accelerator model of the catalog")
        self.path = path
        self.pattern = pattern


def flavor_options(
    catalog: Catalog, accelerators: Mapping[str, Any], path: str = "accelerators"
) -> tuple[FlavorOption, ...]:
    """Expand `anyOf` patterns into concrete catalog flavors, in the user's order, deduplicated."""
    fraction = accelerators.get("fraction")
    milli = max(1, round(float(fraction) * 1000)) if fraction is not None else WHOLE
    memory = memory_mib(accelerators["minMemory"]) if accelerators.get("minMemory") else 0
    seen: set[str] = set()
    options: list[FlavorOption] = []
    for i, choice in enumerate(accelerators["anyOf"]):
        models = catalog.match(choice["flavor"])
        if not models:
            raise UnknownFlavor(f"{path}.anyOf[{i}].flavor", choice["flavor"])
        for model in models:
            if model.key in seen:
                continue
            seen.add(model.key)
            options.append(
                FlavorOption(
                    flavor=model.key,
                    count=int(choice.get("count") or accelerators.get("count", 1)),
                    milli=milli,
                    memory_mib=memory,
                    speed=model.speed,
                    tolerations=tuple(key for key, _ in model.tolerations),
                )
            )
    return tuple(options)


def core_tasks(catalog: Catalog, tasks: Sequence[Mapping[str, Any]]) -> tuple[Task, ...]:
    """Tasks of a manifest (JSON form) as core tasks."""
    out = []
    for i, task in enumerate(tasks):
        resources = task.get("resources", {})
        accel = resources.get("accelerators")
        out.append(
            Task(
                name=task["name"],
                replicas=int(task.get("replicas", 1)),
                cpu_milli=cpu_milli(resources.get("cpu", "1")),
                memory_mib=memory_mib(resources.get("memory", "1Gi")),
                accelerators=(
                    AcceleratorRequest(
                        flavor_options(catalog, accel, f"spec.tasks[{i}].resources.accelerators")
                    )
                    if accel
                    else None
                ),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class JobFacts:
    """The stored facts of a job the core needs besides its manifest."""

    id: str
    queue: str  # "<tenant>/<queue>"
    priority: int
    preemptible: bool
    created_at: float
    runtime_s: float = 0.0
    avoided_clusters: frozenset[str] = frozenset()  # where its gang recently failed to start


def core_job(catalog: Catalog, facts: JobFacts, manifest: Mapping[str, Any]) -> Job:
    """A stored job as the core's `Job`."""
    spec = manifest["spec"]
    placement = spec.get("placement", {})
    return Job(
        id=facts.id,
        queue=facts.queue,
        tasks=core_tasks(catalog, spec["tasks"]),
        priority=facts.priority,
        preemptible=facts.preemptible,
        created_at=facts.created_at,
        gang=bool(spec.get("gang", True)),
        constraints=Constraints(
            regions=frozenset(placement.get("regions", ())),
            clusters=frozenset(placement.get("clusters", ())),
            cluster_selector=MappingProxyType(dict(placement.get("clusterSelector", {}))),
            avoided_clusters=facts.avoided_clusters,
        ),
        runtime_s=facts.runtime_s,
    )


@dataclass(frozen=True)
class DeviceRow:
    """One stored device."""

    flavor: str
    index: int
    memory_mib: int
    healthy: bool
    used_milli: int
    used_memory_mib: int


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
