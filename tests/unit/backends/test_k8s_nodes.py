"""Nodes to NodeInfo: allocatable, use by every pod, device health and occupancy."""

from __future__ import annotations

from typing import Any

from cluster_agents.backends.k8s_nodes import node_info, node_view
from cluster_agents.kube.pods import pod_info
from federation.wire.agent import NodeInfo, Taint
from tests.unit.backends.k8s_objects import (
    ASCEND,
    CATALOG,
    node,
    pod,
    recorded,
    suanpan_pod,
)

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}


def info(n: dict[str, Any], *pods: dict[str, Any]) -> NodeInfo:
    return node_info(node_view(CATALOG, n), [pod_info(CATALOG, p) for p in pods])


def used(n: NodeInfo) -> list[tuple[int, int]]:
    """(used milli, used MiB) per device index."""
    return [(d.used_milli, d.used_memory_mib) for d in n.devices]


def test_recorded_kwok_node() -> None:
    n = info(recorded("node"))
    assert (n.name, n.ready, n.unschedulable, n.taints) == ("bj-ascend-0", True, False, [])
    assert (n.cpu_milli, n.memory_mib, n.pods) == (128_000, 1024 * 1024, 110)
    assert n.labels["node.kubernetes.io/npu.chip.name"] == "910B3"
    assert [(d.flavor, d.index, d.memory_mib, d.healthy) for d in n.devices] == [
        ("huawei/Ascend910B3", i, 65536, True) for i in range(8)
    ]
    assert (n.used_cpu_milli, n.used_memory_mib, n.used_pods) == (0, 0, 0)


def test_condition_spec_and_taints() -> None:
    taints = [
        {"key": "dedicated", "value": "ai", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "odd", "effect": "SomethingNew"},  # not an effect the hub knows: left out
    ]
    n = info(node("n", ready="Unknown", taints=taints, unschedulable=True))
    assert (n.ready, n.unschedulable) == (False, True)
    assert n.taints == [
        Taint(key="dedicated", value="ai", effect="NoSchedule"),
        Taint(key="node.kubernetes.io/unreachable", effect="NoExecute"),
    ]


def test_use_sums_every_non_terminal_pod_bound_to_the_node() -> None:
    n = info(
        node("n", {"cpu": "3500m", "memory": "10Gi"}),
        pod("web", "n", {"cpu": "500m", "memory": "512Mi"}),
        pod("db", "n", {"cpu": "1", "memory": "1Gi"}, namespace="other"),
        pod("init", "n", {"cpu": "100m"}, init_requests=[{"cpu": "2", "memory": "64Mi"}]),
        pod("done", "n", {"cpu": "8"}, phase="Succeeded"),
        pod("failed", "n", {"cpu": "8"}, phase="Failed"),
        pod("elsewhere", "m", {"cpu": "8"}),
        pod("unbound", "", {"cpu": "8"}, phase="Pending"),
    )
    assert (n.cpu_milli, n.memory_mib) == (3500, 10240)
    # init: the largest init container (2 CPUs) beats the app containers (100m)
    assert (n.used_cpu_milli, n.used_memory_mib, n.used_pods) == (3500, 512 + 1024 + 64, 3)


def test_devices_beyond_allocatable_are_unhealthy() -> None:
    n = info(node("n", {ASCEND: "7"}, capacity={ASCEND: "8"}))
    assert [d.healthy for d in n.devices] == [True] * 7 + [False]
    gone = info(node("n", {}, capacity={ASCEND: "2"}))  # plugin withdrew every device
    assert [(d.flavor, d.healthy) for d in gone.devices] == [("huawei/Ascend910B3", False)] * 2


def test_extender_placed_pods_hold_their_exact_devices_and_shares() -> None:
    n = info(
        node("n", {ASCEND: "8"}),
        suanpan_pod("sp-a-0", "n", devices="5,6", count=2),
        suanpan_pod("sp-b-0", "n", devices="1", milli=250, memory_mib=16384),
        suanpan_pod("sp-b-1", "n", devices="1", milli=500, memory_mib=32768),
        suanpan_pod("sp-c-0", "n", devices="0", status={"phase": "Succeeded"}),
    )
    whole = (1000, 65536)
    assert used(n) == [(0, 0), (750, 49152), (0, 0), (0, 0), (0, 0), whole, whole, (0, 0)]


def test_pods_without_device_annotation_take_the_lowest_free_devices() -> None:
    n = info(
        node("n", {ASCEND: "7"}, capacity={ASCEND: "8"}),
        suanpan_pod("sp-a-0", "n", devices="0,1", count=2),
        suanpan_pod("sp-b-0", "n", devices="3", milli=250, memory_mib=16384),
        pod("kubectl-run", "n", {ASCEND: "2"}),  # not Suanpan's: devices 2 and 4
        suanpan_pod("sp-d-0", "n", count=1),  # ours, bound without the extender: device 5
    )
    whole = (1000, 65536)
    assert used(n) == [whole, whole, whole, (250, 16384), whole, whole, (0, 0), (0, 0)]
    assert [d.healthy for d in n.devices][-1] is False
    assert n.used_pods == 4


def test_resource_shared_by_several_models_is_matched_through_the_node() -> None:
    # nvidia.com/gpu names several models: the node's product label says which one
    n = info(
        node("g", {"nvidia.com/gpu": "8"}, labels=H100), pod("train", "g", {"nvidia.com/gpu": "3"})
    )
    assert {d.flavor for d in n.devices} == {"nvidia/H100-80GB"}
    assert used(n)[:4] == [(1000, 81559)] * 3 + [(0, 0)]


def test_overcommitted_node_marks_what_exists_and_caps_shares() -> None:
    n = info(
        node("n", {ASCEND: "2"}),
        suanpan_pod("sp-a-0", "n", devices="0,1,9", count=3),  # index 9 does not exist
        suanpan_pod("sp-b-0", "n", devices="0", milli=600, memory_mib=1),
        pod("foreign", "n", {ASCEND: "4"}),  # nothing free is left for it
    )
    assert [d.used_milli for d in n.devices] == [1000, 1000]


def test_node_without_accelerators_or_with_unknown_ones() -> None:
    assert info(node("cpu")).devices == []
    odd = info(node("odd", {"amd.com/gpu": "4"}), pod("p", "odd", {"amd.com/gpu": "1"}))
    assert odd.devices == []  # not in the catalog: no model to report


def test_taints_the_hub_cannot_take_are_left_out() -> None:
    long_key = "a" * 250 + ".example.com/" + "b" * 60  # a valid Kubernetes key, too long here
    n = info(node("n", taints=[{"key": long_key, "effect": "NoSchedule"}]))
    assert n.taints == []
