"""The simulated cluster binds as the real one would: CPU-only pods stay off accelerator
nodes exactly as their node exclusions say."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from cluster_agents.agent.backend import NodeExclusion, PodSpec
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster, _Pod
from federation.podtemplate import PodTemplate
from federation.wire import annotations as ann
from tests.unit.backends.k8s_objects import CATALOG

GPU_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}


def _pod(name: str, avoid: tuple[NodeExclusion, ...]) -> PodSpec:
    return PodSpec(
        name=name,
        namespace="ns-t",
        tenant="t",
        job="j",
        epoch=1,
        task="prep",
        replica=0,
        template=PodTemplate.model_validate({"spec": {"containers": [{"name": "prep"}]}}),
        container="prep",
        cpu_milli=1000,
        memory_mib=1024,
        image="cpu",
        labels={},
        annotations={},
        requests={"cpu": "1000m", "memory": "1024Mi"},
        avoid_nodes=avoid,
    )


async def test_a_cpu_only_pod_binds_only_where_its_exclusions_allow() -> None:
    sim = SimulatedCluster(
        CATALOG,
        [SimNodeSpec("gpu-0", GPU_LABELS, {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"})],
        tick_s=0.01,
    )
    await sim.start()
    try:
        avoid = (NodeExclusion("nvidia.com/gpu.product"),)
        await sim.create_pods([_pod("kept-off", avoid), _pod("allowed", ())])
        await asyncio.sleep(0.1)
        nodes = {p.name: p.node for p in sim.pods()}
        assert nodes == {"kept-off": "", "allowed": "gpu-0"}
        sim.add_node(SimNodeSpec("cpu-0", {}, {"cpu": "64", "memory": "256Gi"}))
        await asyncio.sleep(0.1)
        assert {p.name: p.node for p in sim.pods()}["kept-off"] == "cpu-0"
    finally:
        await sim.stop()


def test_an_exclusion_with_values_only_excludes_those_values() -> None:
    rule = NodeExclusion("suanpan.io/vendor", ("nvidia", "huawei"))
    assert rule.excludes({"suanpan.io/vendor": "nvidia"})
    assert not rule.excludes({"suanpan.io/vendor": "none"})
    assert not rule.excludes({})


async def test_a_deleted_pod_stops_within_its_grace_period() -> None:
    """A workload that needs 20 s to checkpoint after SIGTERM leaves after 20 s with a 30 s
    grace, after 5 s with a 5 s grace (SIGKILL), and a plain one leaves at once."""
    clock = [0.0]
    sim = SimulatedCluster(
        CATALOG,
        [SimNodeSpec("cpu-0", {}, {"cpu": "64", "memory": "256Gi"})],
        clock=lambda: clock[0],
    )
    slow = {ann.STOP_SECONDS: "20"}
    pods = [
        replace(_pod("patient", ()), annotations=slow),
        replace(_pod("killed", ()), annotations=slow),
        _pod("plain", ()),
    ]
    await sim.create_pods(pods)
    sim._step()  # bind
    for pod in sim._pods.values():
        pod.phase = "Running"
    await sim.delete_pods(["patient", "plain"], 30)
    await sim.delete_pods(["killed"], 5)
    assert {p.name: p.deleting for p in sim.pods()} == {"patient": True, "killed": True}
    for now, left in ((4.9, {"patient", "killed"}), (5, {"patient"}), (20, set())):
        clock[0] = now
        sim._step()
        assert {p.name for p in sim.pods()} == left


async def test_a_pod_without_room_binds_once_room_is_freed_and_is_not_retried_before() -> None:
    """The simulated scheduler keeps pods that found no node aside until capacity is freed
    (kube-scheduler's unschedulable queue): the tick does not scan the nodes for them again,
    and they bind at the first tick after a pod leaves or a node is added."""
    sim = SimulatedCluster(CATALOG, [SimNodeSpec("cpu-0", {}, {"cpu": "2", "memory": "4Gi"})])
    await sim.create_pods([_pod("a", ()), _pod("b", ()), _pod("c", ()), _pod("d", ())])
    assert {p.name: p.node for p in sim.pods()} == {"a": "cpu-0", "b": "cpu-0", "c": "", "d": ""}
    scans = 0
    bind = sim._bind

    def counted(pod: _Pod, now: float) -> bool:
        nonlocal scans
        scans += 1
        return bind(pod, now)

    sim._bind = counted  # type: ignore[method-assign]
    for _ in range(5):
        sim._step()
    assert scans == 0  # c and d are one shape that found no node, and nothing was freed
    await sim.delete_pods(["a"], 0)
    sim._step()
    assert {p.name: p.node for p in sim.pods()} == {"b": "cpu-0", "c": "cpu-0", "d": ""}
    assert scans == 2  # c bound; d found no node and waits again
    sim.add_node(SimNodeSpec("cpu-1", {}, {"cpu": "2", "memory": "4Gi"}))
    sim._step()
    assert {p.name: p.node for p in sim.pods()}["d"] == "cpu-1"
