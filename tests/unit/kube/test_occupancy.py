"""The one occupancy function: its rules, and the agent's report and the extender agreeing."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_agents.backends.k8s_nodes import node_info, node_view
from cluster_agents.extender import Cache
from cluster_agents.kube.occupancy import node_inventory, occupancy
from cluster_agents.kube.pods import pod_info
from federation.scheduling.devices import WHOLE
from tests.unit.backends.k8s_objects import ASCEND, CATALOG, node, pod, suanpan_pod

B3 = "huawei/Ascend910B3"
MLU370 = {"cambricon.com/mlu.model": "MLU370-X8"}
SICK = node("n", {ASCEND: "7"}, capacity={ASCEND: "8"})

SCENARIOS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "exact, shares, foreign and unannotated": (
        SICK,
        [
            suanpan_pod("sp-a-0", "n", devices="0,1", count=2),
            suanpan_pod("sp-b-0", "n", devices="3", milli=250, memory_mib=16384),
            suanpan_pod("sp-b-1", "n", devices="3", milli=500, memory_mib=32768),
            pod("kubectl-run", "n", {ASCEND: "2"}),
            suanpan_pod("sp-d-0", "n", count=1),
            suanpan_pod("sp-e-0", "n", devices="6", status={"phase": "Succeeded"}),
            suanpan_pod("sp-f-0", "other", devices="7"),
        ],
    ),
    "two pods naming one device, and a device the node lacks": (
        node("n", {ASCEND: "4"}),
        [
            suanpan_pod("sp-a-0", "n", devices="0,1", count=2),
            suanpan_pod("sp-b-0", "n", devices="1,2", count=2),
            suanpan_pod("sp-c-0", "n", devices="9", count=1),
        ],
    ),
    "a share that gives no memory takes its part of the device's": (
        node("n", {ASCEND: "2"}),
        [suanpan_pod("sp-a-0", "n", devices="1", milli=500)],
    ),
    "a sharing count resource several models use": (
        node("m", {"cambricon.com/mlu370": "8"}, labels=MLU370),
        [pod("vmlu", "m", {"cambricon.com/vmlu": "2"})],
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_agent_report_and_extender_cache_see_the_same_devices(scenario: str) -> None:
    n, pods = SCENARIOS[scenario]
    reported = node_info(node_view(CATALOG, n), [pod_info(CATALOG, p) for p in pods])
    cache = Cache(CATALOG)
    cache.replace_nodes([n])
    cache.replace_pods(pods)
    name = n["metadata"]["name"]
    seen = []
    for resolved in cache.nodes[name].devices:
        d = cache.occupancy(name, resolved.model.key).devices
        seen += [
            (d.model, i, d.used_milli[i], d.used_memory_mib[i], d.healthy[i]) for i in range(d.size)
        ]
    assert seen, "the scenario needs devices"
    assert sorted(seen) == sorted(
        (x.flavor, x.index, x.used_milli, x.used_memory_mib, x.healthy) for x in reported.devices
    )


def test_rules() -> None:
    n, pods = SCENARIOS["exact, shares, foreign and unannotated"]
    held = occupancy(node_inventory(CATALOG, n), B3, [pod_info(CATALOG, p) for p in pods])
    whole = WHOLE
    # 0,1 named; 3 two shares; kubectl-run the lowest free 2 and 4; sp-d-0 then 5
    assert held.devices.used_milli == (whole, whole, whole, 750, whole, whole, 0, 0)
    assert held.devices.shares[3] == 2
    assert held.devices.healthy == (True,) * 7 + (False,)
    assert len(held.placed) == 5  # the finished pod and the other node's pod hold nothing


def test_conflicts_move_and_missing_devices_are_dropped() -> None:
    n, pods = SCENARIOS["two pods naming one device, and a device the node lacks"]
    held = occupancy(node_inventory(CATALOG, n), B3, [pod_info(CATALOG, p) for p in pods])
    # sp-c-0 names only a device the node lacks and sp-b-0 one that sp-a-0 holds: both count
    # as unannotated, whole devices on the lowest free indices; a pod whose devices conflict
    # comes after those that named none, and only one device is left for it
    assert [p.devices for p in held.placed] == [(0, 1), (2,), (3,)]
    assert held.devices.free_count() == 0


def test_unknown_model_raises() -> None:
    with pytest.raises(KeyError):
        occupancy(node_inventory(CATALOG, node("cpu")), B3, [])
