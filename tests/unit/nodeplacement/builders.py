"""Small pools for placement tests."""

from __future__ import annotations

from federation.catalog.types import SharingRule, TopologyRule
from federation.nodeplacement import PodRequest, Pool, PoolNode
from federation.scheduling.devices import DeviceRequest, NodeDevices

SHARE = SharingRule(enabled=True)


def gpu_node(
    name: str, used: tuple[int, ...], model: str = "T4", cpu: int = 32_000, memory: int = 65_536
) -> PoolNode:
    """A node whose device `d` has `used[d]` milli in use (1000: taken whole)."""
    n = len(used)
    devices = NodeDevices(
        model=model,
        memory_mib=(16_000,) * n,
        used_milli=used,
        used_memory_mib=tuple(16 * u for u in used),
        healthy=(True,) * n,
        topology=TopologyRule(),
        sharing=SHARE,
        shares=tuple(1 if 0 < u < 1000 else 0 for u in used),
    )
    return PoolNode(name, cpu, memory, devices)


def pool_of(*nodes: PoolNode) -> Pool:
    """A pool of the given nodes, in order."""
    return Pool(list(nodes))


def gpus(
    count: int = 1, milli: int = 1000, cpu: int = 1000, models: tuple[str, ...] = ()
) -> PodRequest:
    """A request for `count` GPUs of `milli` each."""
    return PodRequest(cpu, 1024, DeviceRequest(count=count, milli=milli), frozenset(models))


def cpu_only(cpu: int = 1000) -> PodRequest:
    """A request without devices."""
    return PodRequest(cpu, 1024)
