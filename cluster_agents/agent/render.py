"""Render an assignment into pods for the chosen flavor (pure: catalog in, pod specs out).

Per task replica: the vendor's resource name and count (or share resources), the per-vendor
image, tolerations of the vendor's node taints, the job's priority class, our scheduler name,
and the labels/annotations of `federation.wire.annotations` that fence and describe the pod.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cluster_agents.agent.backend import NodeExclusion, PodSpec, Toleration
from federation.catalog import AcceleratorModel, Catalog
from federation.demand import memory_mib
from federation.wire import annotations as ann
from federation.wire.agent import Assignment


class RenderError(ValueError):
    """The assignment cannot be turned into pods (unknown flavor, no image for the vendor)."""


def pod_name(job: str, epoch: int, task: str, replica: int) -> str:
    """Deterministic pod name: the same assignment always renders the same names."""
    return f"sp-{job[:8]}-e{epoch}-{task}-{replica}"[:63].rstrip("-")


def _choice(
    catalog: Catalog, accel: Mapping[str, Any], model: AcceleratorModel
) -> Mapping[str, Any]:
    """The first `anyOf` entry whose pattern covers `model`."""
    for choice in accel["anyOf"]:
        if any(m.key == model.key for m in catalog.match(choice["flavor"])):
            return dict(choice)
    return {}


def _image(task: Mapping[str, Any], model: AcceleratorModel | None, catalog: Catalog) -> str:
    if model is not None:
        image = _choice(catalog, task["resources"]["accelerators"], model).get("image")
        if image:
            return str(image)
        vendor_image = task.get("images", {}).get(model.vendor.value)
        if vendor_image:
            return str(vendor_image)
    image = task.get("image")
    if not image:
        vendor = model.vendor.value if model else "cpu"
        raise RenderError(f"task {task['name']!r} has no image for vendor {vendor!r}")
    return str(image)


def _device_resources(
    model: AcceleratorModel, accel: Mapping[str, Any], count: int
) -> dict[str, str]:
    fraction = accel.get("fraction")
    if fraction is None:
        return {model.resource: str(count)}
    share = model.sharing
    out = {share.share_resource or model.resource: "1"}
    if share.core_resource:
        out[share.core_resource] = str(max(1, round(float(fraction) * 100)))
    if share.memory_resource and accel.get("minMemory"):
        unit = max(1, share.memory_unit_mib)
        out[share.memory_resource] = str(math.ceil(memory_mib(accel["minMemory"]) / unit) * unit)
    return out


def cpu_only_exclusions(catalog: Catalog) -> tuple[NodeExclusion, ...]:
    """The node anti-affinity of a CPU-only pod: no node that carries a catalog accelerator."""
    return tuple(
        NodeExclusion(key, tuple(sorted(values)))
        for key, values in catalog.accelerator_node_labels().items()
    )


def render(assignment: Assignment, catalog: Catalog, namespace: str) -> list[PodSpec]:
    """The pods of an Active assignment, every replica of every task.

    A gang (assignment `gang`, more than one pod) is created behind the `GANG_GATE` scheduling
    gate; its accelerator pods carry `GANG` / `GANG_SIZE` for the extender's bind.
    """
    job = str(assignment.job)
    hints = {(h.task, h.replica): h for h in assignment.hints}
    replicas = {t["name"]: int(t.get("replicas", 1)) for t in assignment.tasks}
    gang = f"{job}-e{assignment.epoch}" if assignment.gang and sum(replicas.values()) > 1 else ""
    binding = sum(n for task, n in replicas.items() if assignment.flavors.get(task))
    pods: list[PodSpec] = []
    for task in assignment.tasks:
        name = task["name"]
        flavor = assignment.flavors.get(name)
        model = catalog.get(flavor) if flavor else None
        if flavor and model is None:
            raise RenderError(f"flavor {flavor!r} of task {name!r} is not in this agent's catalog")
        resources = task.get("resources", {})
        requests = {
            "cpu": str(resources.get("cpu", "1")),
            "memory": str(resources.get("memory", "1Gi")),
        }
        annotations = dict(task.get("annotations", {}))
        tolerations: tuple[Toleration, ...] = ()
        env_from: dict[str, str] = {}
        avoid: tuple[NodeExclusion, ...] = ()
        if model is None and annotations.get(ann.ACCELERATOR_NODES) != "allow":
            avoid = cpu_only_exclusions(catalog)
        if model is not None:
            accel = resources["accelerators"]
            count = int(_choice(catalog, accel, model).get("count") or accel.get("count", 1))
            requests.update(_device_resources(model, accel, count))
            fraction = accel.get("fraction")
            annotations[ann.FLAVOR] = model.key
            annotations[ann.DEVICE_REQUEST] = json.dumps(
                {
                    "count": count,
                    "milli": round(float(fraction) * 1000) if fraction is not None else 1000,
                    "memoryMib": memory_mib(accel["minMemory"]) if accel.get("minMemory") else 0,
                },
                separators=(",", ":"),
            )
            tolerations = tuple(Toleration(key, effect) for key, effect in model.tolerations)
            env_from = {a.env: a.annotation for a in model.allocation if a.kind == "visible-env"}
            if gang:
                annotations |= {ann.GANG: gang, ann.GANG_SIZE: str(binding)}
        image = _image(task, model, catalog)
        for replica in range(int(task.get("replicas", 1))):
            hint = hints.get((name, replica))
            pod_annotations = dict(annotations)
            if hint is not None:
                pod_annotations[ann.HINT_DEVICES] = (
                    f"{hint.node}:{','.join(map(str, hint.devices))}"
                )
            pods.append(
                PodSpec(
                    name=pod_name(job, assignment.epoch, name, replica),
                    namespace=namespace,
                    job=job,
                    epoch=assignment.epoch,
                    task=name,
                    replica=replica,
                    image=image,
                    labels={
                        ann.MANAGED_LABEL: "true",
                        ann.JOB_LABEL: job,
                        ann.TASK_LABEL: name,
                        ann.REPLICA_LABEL: str(replica),
                        ann.EPOCH_LABEL: str(assignment.epoch),
                    },
                    annotations=pod_annotations,
                    requests=requests,
                    command=tuple(task.get("command", ())),
                    args=tuple(task.get("args", ())),
                    env=dict(task.get("env", {})),
                    tolerations=tolerations,
                    priority=assignment.priority,
                    priority_class=f"suanpan-{assignment.priority_class}",
                    scheduler_name=ann.SCHEDULER_NAME,
                    env_from_annotations=env_from,
                    avoid_nodes=avoid,
                    gang=gang,
                    gated=bool(gang),
                )
            )
    return pods
