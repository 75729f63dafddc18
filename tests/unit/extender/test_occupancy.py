"""Occupancy is rebuilt from pod annotations (and reservations) alone, as after a restart."""

from __future__ import annotations

from cluster_agents.extender import Cache, Reservation
from cluster_agents.kube.pods import pod_demand
from federation.scheduling.devices import WHOLE, DeviceRequest, FitCode
from tests.unit.extender.builders import ascend_910b, cache, nvidia, pod

B3 = "huawei/Ascend910B3"
H100 = "nvidia/H100-80GB"


def used(c: Cache, node: str, model: str) -> tuple[int, ...]:
    return c.occupancy(node, model).devices.used_milli


def test_annotated_pods_hold_exactly_their_devices() -> None:
    c = cache(
        ascend_910b("n", 16),
        pods=(
            pod("a", flavor=B3, count=4, node_name="n", devices="0,1,2,3", phase="Running"),
            pod("b", flavor=B3, count=2, node_name="n", devices="8,9"),
        ),
    )
    assert used(c, "n", B3) == (WHOLE,) * 4 + (0,) * 4 + (WHOLE,) * 2 + (0,) * 6


def test_shares_count_as_shares() -> None:
    c = cache(
        nvidia("g"),
        pods=(
            pod("s1", flavor=H100, milli=300, memory_mib=20000, node_name="g", devices="5"),
            pod("s2", flavor=H100, milli=500, memory_mib=30000, node_name="g", devices="5"),
        ),
    )
    devices = c.occupancy("g", H100).devices
    assert devices.used_milli[5] == 800 and devices.shares[5] == 2
    assert devices.used_memory_mib[5] == 50000
    assert devices.free_count() == 7


def test_finished_and_unbound_pods_hold_nothing() -> None:
    c = cache(
        ascend_910b("n"),
        pods=(
            pod(
                "done",
                flavor=B3,
                count=8,
                node_name="n",
                devices="0,1,2,3,4,5,6,7",
                phase="Succeeded",
            ),
            pod("pending", flavor=B3, count=8, devices="0,1,2,3,4,5,6,7"),  # stale: not bound
        ),
    )
    assert used(c, "n", B3) == (0,) * 8


def test_bound_pods_without_devices_count_conservatively_as_whole_devices() -> None:
    c = cache(
        ascend_910b("n"),
        pods=(
            pod("exact", flavor=B3, count=2, node_name="n", devices="0,1"),
            pod("foreign", resources={"huawei.com/Ascend910B3": "3"}, node_name="n"),
            pod("share", flavor=B3, milli=250, node_name="n"),  # a share without devices
        ),
    )
    devices = c.occupancy("n", B3).devices
    # the exact ones stay exact; the others take the lowest free indices, in name order
    assert devices.used_milli == (WHOLE,) * 6 + (0, 0)
    assert [p.devices for p in c.occupancy("n", B3).placed] == [(0, 1), (2, 3, 4), (5,)]


def test_devices_beyond_allocatable_are_unhealthy_but_still_held() -> None:
    sick = ascend_910b("n")
    sick["status"]["allocatable"]["huawei.com/Ascend910B3"] = "6"  # capacity stays 8
    c = cache(sick, pods=(pod("a", flavor=B3, count=1, node_name="n", devices="7"),))
    devices = c.occupancy("n", B3).devices
    assert devices.healthy == (True,) * 6 + (False, False)
    assert devices.used_milli == (0,) * 7 + (WHOLE,)  # the pod keeps its sick device
    demand = pod_demand(c.catalog, pod("p", flavor=B3, count=8))
    assert demand is not None
    fit = c.fit("n", demand)
    assert fit.code is FitCode.INSUFFICIENT and "(6 free)" in fit.reason


def test_two_pods_claiming_one_device_both_count() -> None:
    c = cache(
        ascend_910b("n"),
        pods=(
            pod("a", flavor=B3, count=2, node_name="n", devices="0,1"),
            pod("b", flavor=B3, count=2, node_name="n", devices="1,2"),
        ),
    )
    assert c.occupancy("n", B3).devices.free_count() == 4


def test_reservations_count_until_the_pod_is_seen_bound() -> None:
    p = pod("p", flavor=B3, count=4)
    c = cache(ascend_910b("n"), pods=(p,))
    c.reserve(p["metadata"]["uid"], Reservation("n", B3, DeviceRequest(4), (4, 5, 6, 7)))
    assert used(c, "n", B3) == (0,) * 4 + (WHOLE,) * 4
    p["spec"]["nodeName"] = "n"
    p["metadata"]["annotations"]["suanpan.io/devices"] = "4,5,6,7"
    c.set_pod(p)
    assert c.reservations == 0
    assert used(c, "n", B3) == (0,) * 4 + (WHOLE,) * 4  # now held by the pod itself


def test_generation_moves_only_when_occupancy_can_change() -> None:
    p = pod("p", flavor=B3, count=1, node_name="n", devices="0")
    c = cache(ascend_910b("n"), pods=(p,))
    gen = c.generation("n")
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    c.set_pod(p)  # a status-only change
    c.set_node(ascend_910b("n"))  # a heartbeat
    assert c.generation("n") == gen
    c.remove_pod(p["metadata"]["uid"])
    assert c.generation("n") > gen and used(c, "n", B3) == (0,) * 8


def test_relist_forgets_what_is_gone() -> None:
    c = cache(
        ascend_910b("n"), ascend_910b("m"), pods=(pod("a", flavor=B3, node_name="n", devices="0"),)
    )
    layout = c.layout
    c.replace_nodes([ascend_910b("n")])
    c.replace_pods([])
    assert set(c.nodes) == {"n"} and not c.pods and c.layout > layout
    assert used(c, "n", B3) == (0,) * 8
