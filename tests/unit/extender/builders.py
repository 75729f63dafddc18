"""Small builders of Node and Pod JSON, and an in-memory pod API, for the extender tests."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster_agents.extender import APIError, Cache
from federation.catalog import load_catalog
from federation.wire import annotations as wire

CATALOG = load_catalog()

ASCEND_910A = {"accelerator": "huawei-Ascend910", "accelerator-type": "module"}
ASCEND_910B_16 = {"accelerator-type": "module-910b-16"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def node(
    name: str,
    resources: Mapping[str, int],
    labels: Mapping[str, str] | None = None,
    cpu: str = "128",
    memory: str = "1Ti",
) -> dict[str, Any]:
    """A Node with these extended resources (capacity = allocatable) and labels."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    allocatable.update({k: str(v) for k, v in resources.items()})
    return {
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def ascend_910a(name: str) -> dict[str, Any]:
    """An Atlas 800 training server: 8 Ascend 910A in two HCCS rings of 4."""
    return node(name, {"huawei.com/Ascend910A": 8}, ASCEND_910A)


def ascend_910b(name: str, n: int = 8) -> dict[str, Any]:
    """An Atlas 800T A2 (8) or a Box16 (16 NPUs in two rings of 8) of Ascend 910B3."""
    return node(name, {"huawei.com/Ascend910B3": n}, ASCEND_910B_16 if n == 16 else {})


def nvidia(name: str, product: Mapping[str, str] = H100, n: int = 8) -> dict[str, Any]:
    """An NVIDIA node whose GPU feature discovery names the product."""
    return node(name, {"nvidia.com/gpu": n}, product)


def kunlun(name: str) -> dict[str, Any]:
    """A Kunlunxin P800 node: 8 XPUs in two NUMA wings of 4."""
    return node(name, {"kunlunxin.com/xpu": 8})


_uids = iter(range(1, 1 << 30))


def pod(
    name: str,
    *,
    flavor: str | None = None,
    count: int = 1,
    milli: int | None = None,
    memory_mib: int | None = None,
    resources: Mapping[str, str] | None = None,
    node_name: str = "",
    devices: str | None = None,
    phase: str = "Pending",
    uid: str | None = None,
    cpu: str = "4",
) -> dict[str, Any]:
    """A pod; with `flavor` it carries the agent's FLAVOR and DEVICE_REQUEST annotations."""
    notes: dict[str, str] = {}
    if flavor is not None:
        notes[wire.FLAVOR] = flavor
        request: dict[str, int] = {"count": count}
        if milli is not None:
            request["milli"] = milli
        if memory_mib is not None:
            request["memoryMib"] = memory_mib
        notes[wire.DEVICE_REQUEST] = json.dumps(request)
    if devices is not None:
        notes[wire.DEVICES] = devices
    requests = {"cpu": cpu, "memory": "8Gi", **(resources or {})}
    spec: dict[str, Any] = {
        "schedulerName": wire.SCHEDULER_NAME,
        "containers": [{"name": "main", "resources": {"requests": requests, "limits": requests}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or f"uid-{next(_uids)}",
            "annotations": notes,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def cache(*nodes: dict[str, Any], pods: tuple[dict[str, Any], ...] = ()) -> Cache:
    """A synced cache holding these nodes and pods."""
    c = Cache(CATALOG)
    c.replace_nodes(nodes)
    c.replace_pods(pods)
    return c


@dataclass
class FakeAPI:
    """Pods in memory; each call yields to the loop (and may be told to fail), as real I/O does.

    Successful changes are also shown to `cache` at once, as a watch would, when it is set.
    """

    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    cache: Cache | None = None
    fail: set[str] = field(default_factory=set)  # failing calls: "bind", or "bind:<pod>"
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    calls: list[tuple[str, str]] = field(default_factory=list)

    def add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = obj
        if self.cache is not None:
            self.cache.set_pod(obj)

    async def _io(self, call: str, name: str) -> None:
        self.calls.append((call, name))
        for _ in range(self.rng.randint(0, 3)):
            await asyncio.sleep(0)
        if call in self.fail or f"{call}:{name}" in self.fail:
            raise APIError(500, f"{call} failed on purpose")

    async def read_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        await self._io("read", name)
        if (namespace, name) not in self.pods:
            raise APIError(404, f"pods {name!r} not found")
        return self.pods[(namespace, name)]

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> None:
        await self._io("bind", name)
        obj = self.pods[(namespace, name)]
        if obj["metadata"]["uid"] != uid or obj["spec"].get("nodeName"):
            raise APIError(409, f"pod {name} is gone or already bound")
        obj["metadata"]["annotations"].update(annotations)
        obj["spec"]["nodeName"] = node
        if self.cache is not None:
            self.cache.set_pod(obj)
