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


async def test_running_pods_end_at_their_time_and_a_lost_one_does_not_end_again() -> None:
    """A pod that runs 10 s succeeds at 10 s, one told to fail after 5 s fails then with its
    reason, and a pod lost with its node stays Failed (NodeLost) when its time comes."""
    clock = [0.0]
    sim = SimulatedCluster(
        CATALOG,
        [
            SimNodeSpec("a-node", {}, {"cpu": "2", "memory": "16Gi"}),
            SimNodeSpec("b-node", {}, {"cpu": "2", "memory": "16Gi"}),
        ],
        clock=lambda: clock[0],
    )
    runs = {ann.RUN_SECONDS: "10"}
    fails = {ann.RUN_SECONDS: "5", ann.FAIL_REASON: "OOMKilled"}
    await sim.create_pods(
        [
            replace(_pod("done", ()), annotations=runs),
            replace(_pod("oom", ()), annotations=fails),
            replace(_pod("lost", ()), annotations=runs, cpu_milli=2000),
        ]
    )
    assert {p.name: p.node for p in sim.pods()} == {
        "done": "a-node",
        "oom": "a-node",
        "lost": "b-node",
    }
    sim.fail_node("b-node")
    for now, seen in (
        (4.9, {"done": ("Running", ""), "oom": ("Running", "")}),
        (5.0, {"done": ("Running", ""), "oom": ("Failed", "OOMKilled")}),
        (10.0, {"done": ("Succeeded", ""), "oom": ("Failed", "OOMKilled")}),
    ):
        clock[0] = now
        sim._step()
        assert {p.name: (p.phase, p.reason) for p in sim.pods()} == {
            **seen,
            "lost": ("Failed", "NodeLost"),
        }


async def test_a_device_pod_only_looks_at_nodes_of_its_model_and_a_removed_node_is_gone() -> None:
    """Pods asking for a device model bind to a node of that model; once that node is removed
    the pod asking for it waits, and binds again when a node of the model is added."""
    gpu = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "256Gi"}
    sim = SimulatedCluster(
        CATALOG,
        [
            SimNodeSpec("cpu-0", {}, {"cpu": "64", "memory": "256Gi"}),
            SimNodeSpec("gpu-0", GPU_LABELS, gpu),
        ],
    )
    model = next(n.devices[0].flavor for n in sim.nodes() if n.devices)
    wants = {ann.DEVICE_REQUEST: '{"count": 2}', ann.FLAVOR: model}
    await sim.create_pods([replace(_pod("a", ()), annotations=wants)])
    assert {p.name: (p.node, len(p.devices)) for p in sim.pods()} == {"a": ("gpu-0", 2)}
    sim.remove_node("gpu-0")
    await sim.create_pods([replace(_pod("b", ()), annotations=wants)])
    assert {p.name: p.node for p in sim.pods()}["b"] == ""
    sim.add_node(SimNodeSpec("gpu-1", GPU_LABELS, gpu))
    sim._step()
    assert {p.name: p.node for p in sim.pods()}["b"] == "gpu-1"
