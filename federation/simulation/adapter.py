"""Trace rows as the device model sees them: `PoolNode`s and `PodRequest`s.

openb GPUs are shared by compute only. Each GPU gets 1000 MiB of memory per nominal GiB, so the
memory a share takes in proportion to its compute share (`devices`' rule) is exact and never
binds before the compute share does.
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.catalog.types import SharingRule, TopologyRule
from federation.nodeplacement import PodRequest, PoolNode, TaskType, task_type
from federation.scheduling.devices import DeviceRequest, NodeDevices
from federation.simulation.trace import TraceNode, TracePod

NOMINAL_GIB = {"V100M32": 32, "A10": 24}  # others (P100, T4, V100M16, G1-G3): 16
SHARING = SharingRule(enabled=True)


def pool_node(node: TraceNode) -> PoolNode:
    """A trace node with all devices free and shareable."""
    devices = None
    if node.gpu > 0:
        memory = 1000 * NOMINAL_GIB.get(node.model, 16)
        zeros = (0,) * node.gpu
        devices = NodeDevices(
            model=node.model,
            memory_mib=(memory,) * node.gpu,
            used_milli=zeros,
            used_memory_mib=zeros,
            healthy=(True,) * node.gpu,
            topology=TopologyRule(),
            sharing=SHARING,
        )
    return PoolNode(node.name, node.cpu_milli, node.memory_mib, devices)


def pod_request(pod: TracePod) -> PodRequest:
    """A trace pod as a request: `num_gpu` devices of `gpu_milli` each (or a share of one)."""
    device = DeviceRequest(count=pod.num_gpu, milli=pod.gpu_milli) if pod.num_gpu else None
    return PodRequest(pod.cpu_milli, pod.memory_mib, device, frozenset(pod.gpu_spec))


def task_types(pods: Sequence[TracePod]) -> list[TaskType]:
    """The task type of every pod (for the target workload)."""
    return [task_type(pod_request(p)) for p in pods]
