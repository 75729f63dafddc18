"""Extender latency: filter + prioritize for one pod at 1,000 nodes, in process.

The cluster is 1,000 Ascend 910B3 nodes (750 Atlas 800T A2 with 8 NPUs, 250 Box16 with 16 in
two rings), about half the NPUs held by bound pods. A seeded stream of pods (1, 2, 4, 8 or 16
NPUs, or a quarter-NPU share) is scheduled as kube-scheduler would: filter with all 1,000 node
names (every node passes kube-scheduler's own resource check), which keeps the node the pod
goes to (`--filter-keeps best`, the default), prioritize only if several survive (as under
`--filter-keeps all`), then that node is bound and the pod shows up in the cache as the watch
would show it.
Finished pods leave at the same rate, so the load stays steady. JSON decoding and encoding of
the bodies is included; the HTTP server is not (see kube_scheduler_throughput for that).

The figures are the thread's CPU time per call, which does not count time the process waits
for a core: the shared 2-core benchmark machine otherwise measures its neighbours. Wall-clock
percentiles and the load average are kept in the params.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from bench.results import Figure, write_figure
from cluster_agents.extender import Cache, Extender, choose
from cluster_agents.kube.pods import format_devices, pod_demand
from federation.catalog import load_catalog
from federation.wire import annotations as wire

NODES = 1000
WARMUP = 200
MEASURED = 2000
FLAVOR = "huawei/Ascend910B3"
RESOURCE = "huawei.com/Ascend910B3"
SHAPES = [
    ({"count": 1}, 30),
    ({"count": 2}, 15),
    ({"count": 4}, 15),
    ({"count": 8}, 25),
    ({"count": 16}, 5),
    ({"count": 1, "milli": 250, "memoryMib": 16384}, 10),
]


class _NoAPI:
    """Binding is simulated in process; nothing here may reach an API."""

    async def read_pod(self, namespace: str, name: str) -> Any:
        raise NotImplementedError

    async def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Any) -> None:
        raise NotImplementedError


def _node(i: int) -> dict[str, Any]:
    big = i % 4 == 0
    labels = {
        "kubernetes.io/hostname": f"node-{i:04d}",
        "kubernetes.io/arch": "arm64",
        "accelerator": "huawei-Ascend910",
    }
    if big:
        labels["accelerator-type"] = "module-910b-16"
    capacity = {"cpu": "192", "memory": "1536Gi", "pods": "110", RESOURCE: "16" if big else "8"}
    return {
        "metadata": {"name": f"node-{i:04d}", "labels": labels, "annotations": {}},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _pod(i: int, shape: dict[str, int]) -> dict[str, Any]:
    count = str(shape["count"])
    resources = {"cpu": "16", "memory": "128Gi", RESOURCE: count}
    return {
        "metadata": {
            "name": f"train-{i}",
            "namespace": "team-a",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "labels": {wire.JOB_LABEL: f"job-{i}", wire.MANAGED_LABEL: "true"},
            "annotations": {wire.FLAVOR: FLAVOR, wire.DEVICE_REQUEST: json.dumps(shape)},
        },
        "spec": {
            "schedulerName": wire.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "mindspore:2.3",
                    "resources": {"requests": resources, "limits": resources},
                    "env": [{"name": "ASCEND_VISIBLE_DEVICES", "value": ""}],
                }
            ],
            "tolerations": [
                {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
        "status": {"phase": "Pending"},
    }


def _place(cache: Cache, pod: dict[str, Any], node: str) -> bool:
    """Bind `pod` to `node` in the cache, as the watch would show it after our bind."""
    demand = pod_demand(cache.catalog, pod)
    assert demand is not None
    _, decision = choose(cache, demand, node, "pack")
    if not decision.ok:
        return False
    pod["spec"]["nodeName"] = node
    pod["metadata"]["annotations"][wire.DEVICES] = format_devices(decision.devices)
    pod["status"]["phase"] = "Running"
    cache.set_pod(pod)
    return True


def measure(seed: int = 1) -> dict[str, float]:
    """Latencies (ms) of filter+prioritize over a steady stream of pods."""
    rng = random.Random(seed)
    cache = Cache(load_catalog())
    cache.replace_nodes([_node(i) for i in range(NODES)])
    cache.replace_pods([])
    extender = Extender(cache, _NoAPI())
    names = sorted(cache.nodes)
    shapes, weights = zip(*SHAPES, strict=True)
    running: list[str] = []
    devices_total = sum(16 if i % 4 == 0 else 8 for i in range(NODES))
    held = 0
    i = 0
    while held < devices_total // 2:  # fill to about half, uniformly at random
        shape = rng.choices(shapes, weights)[0]
        pod = _pod(i, shape)
        if _place(cache, pod, rng.choice(names)):
            running.append(pod["metadata"]["uid"])
            held += shape["count"]
        i += 1
    cpu: list[float] = []
    wall: list[float] = []
    cold = 0.0
    for n in range(WARMUP + MEASURED):
        pod = _pod(i + n, rng.choices(shapes, weights)[0])
        body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = extender.filter(json.loads(body))
        passed = result["NodeNames"]
        scores: list[dict[str, Any]] = []
        if len(passed) > 1:
            scores = extender.prioritize(json.loads(json.dumps({"Pod": pod, "NodeNames": passed})))
        json.dumps(result)
        elapsed_cpu = (time.thread_time() - start_cpu) * 1000
        elapsed = (time.perf_counter() - start) * 1000
        if n == 0:
            cold = elapsed
        if n >= WARMUP:
            cpu.append(elapsed_cpu)
            wall.append(elapsed)
        if passed:
            best = max(scores, key=lambda s: s["Score"])["Host"] if scores else passed[0]
            _place(cache, pod, best)
            running.append(pod["metadata"]["uid"])
        cache.remove_pod(running.pop(rng.randrange(len(running))))  # one finishes
    return {
        "p50": _percentile(cpu, 50),
        "p99": _percentile(cpu, 99),
        "wall_p50": _percentile(wall, 50),
        "wall_p99": _percentile(wall, 99),
        "cold": cold,
    }


def _percentile(values: list[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(len(ordered) * q / 100) - 1)]


def run() -> list[Figure]:
    """Filter+prioritize latency figures at 1,000 nodes."""
    load = os.getloadavg()[0]
    ms = measure()
    params = {
        "nodes": NODES,
        "pods_measured": MEASURED,
        "policy": "suanpan",
        "clock": "thread CPU time",
        "wall_p50_ms": round(ms["wall_p50"], 3),
        "wall_p99_ms": round(ms["wall_p99"], 3),
        "first_call_ms": round(ms["cold"], 1),
        "load_average_1m": round(load, 2),
    }
    return [
        Figure(
            "extender_filter_prioritize_p99_ms_1000_nodes", round(ms["p99"], 3), "ms", False, params
        ),
        Figure(
            "extender_filter_prioritize_p50_ms_1000_nodes", round(ms["p50"], 3), "ms", False, params
        ),
    ]


if __name__ == "__main__":
    for figure in run():
        write_figure(figure)
        print(f"{figure.name}: {figure.value} {figure.unit} {figure.params}")
