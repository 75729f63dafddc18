"""Kubernetes objects for the backend's unit tests: recorded ones and small builders."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from federation.catalog import load_catalog
from federation.wire import annotations as ann

CATALOG = load_catalog()
RECORDED = json.loads((Path(__file__).parent / "data" / "kwok_objects.json").read_text())
ASCEND = "huawei.com/Ascend910B3"
NAMESPACE = "suanpan"
JOB = "0f5c2a8e-3b7d-4c1e-9a6f-2d8b4e7c1a90"


def recorded(kind: str, name: str = "") -> dict[str, Any]:
    """A deep copy of a recorded object: `recorded("node")`, `recorded("pods", "running")`."""
    obj = RECORDED[kind][name] if name else RECORDED[kind]
    return copy.deepcopy(obj)


def node(
    name: str,
    allocatable: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    *,
    ready: str = "True",
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node: 128 CPUs, 1 TiB, 110 pods plus `allocatable` (capacity defaults to it)."""
    alloc = {"cpu": "128", "memory": "1Ti", "pods": "110", **(allocatable or {})}
    return {
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": alloc,
            "capacity": {**alloc, **(capacity or {})},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(
    name: str,
    node_name: str = "",
    requests: Mapping[str, str] | None = None,
    *,
    namespace: str = "default",
    annotations: Mapping[str, str] | None = None,
    phase: str = "Running",
    init_requests: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A pod (anyone's) with one container requesting `requests`."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": dict(requests or {})}}],
            "initContainers": [
                {"name": f"init{i}", "resources": {"requests": dict(r)}}
                for i, r in enumerate(init_requests)
            ],
        },
        "status": {"phase": phase},
    }


def suanpan_pod(
    name: str,
    node_name: str = "",
    *,
    devices: str = "",
    milli: int = 1000,
    memory_mib: int = 0,
    count: int = 1,
    status: Mapping[str, Any] | None = None,
    epoch: int = 3,
) -> dict[str, Any]:
    """A pod the agent created (in NAMESPACE) for an Ascend 910B3 flavor."""
    notes = {
        ann.FLAVOR: "huawei/Ascend910B3",
        ann.DEVICE_REQUEST: json.dumps({"count": count, "milli": milli, "memoryMib": memory_mib}),
    }
    if devices:
        notes[ann.DEVICES] = devices
    obj = pod(
        name,
        node_name,
        {"cpu": "1", "memory": "1Gi", ASCEND: str(count)},
        namespace=NAMESPACE,
        annotations=notes,
    )
    obj["metadata"]["labels"] = {
        ann.MANAGED_LABEL: "true",
        ann.JOB_LABEL: JOB,
        ann.TASK_LABEL: "worker",
        ann.REPLICA_LABEL: name.rsplit("-", 1)[-1],
        ann.EPOCH_LABEL: str(epoch),
    }
    obj["metadata"]["creationTimestamp"] = "2026-11-30T01:02:25Z"
    if status is not None:
        obj["status"] = dict(status)
    return obj
