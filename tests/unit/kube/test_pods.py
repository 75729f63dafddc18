"""What a pod asks for: the agent's annotations, or plain resource requests as whole devices."""

from __future__ import annotations

import pytest

from cluster_agents.kube.pods import (
    Demand,
    DemandError,
    format_devices,
    parse_device_request,
    parse_devices,
    pod_demand,
    pod_info,
)
from federation.scheduling.devices import DeviceRequest
from federation.wire import annotations as wire
from tests.unit.extender.builders import CATALOG, pod


def test_annotations_give_flavor_and_request() -> None:
    p = pod("p", flavor="huawei/Ascend910B3", count=1, milli=250, memory_mib=16384)
    assert pod_demand(CATALOG, p) == Demand(
        "huawei/Ascend910B3", DeviceRequest(1, 250, 16384), cpu_milli=4000, memory_mib=8192
    )


def test_flavor_is_case_insensitive_and_canonicalized() -> None:
    demand = pod_demand(CATALOG, pod("p", flavor="HUAWEI/ascend910b3", count=4))
    assert demand is not None and demand.target == "huawei/Ascend910B3"


@pytest.mark.parametrize(
    ("resources", "target", "count"),
    [
        ({"huawei.com/Ascend910B3": "4"}, "huawei/Ascend910B3", 4),  # names one model
        ({"nvidia.com/gpu": "2"}, "nvidia.com/gpu", 2),  # shared: the node's labels decide
        ({"huawei.com/Ascend910": "8"}, "huawei.com/Ascend910", 8),  # MindCluster's family name
    ],
)
def test_plain_pods_ask_for_whole_devices(
    resources: dict[str, str], target: str, count: int
) -> None:
    demand = pod_demand(CATALOG, pod("p", resources=resources))
    assert demand is not None
    assert (demand.target, demand.request) == (target, DeviceRequest(count))


def test_sharing_amounts_alone_ask_for_no_device() -> None:
    assert pod_demand(CATALOG, pod("p", resources={"nvidia.com/gpumem": "3000"})) is None
    assert pod_demand(CATALOG, pod("p")) is None


def test_init_containers_count_as_kubernetes_does() -> None:
    p = pod("p", resources={"nvidia.com/gpu": "1"})
    p["spec"]["initContainers"] = [
        {"name": "i", "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "16"}}}
    ]
    demand = pod_demand(CATALOG, p)
    assert demand is not None
    assert (demand.request.count, demand.cpu_milli) == (4, 16000)


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("not json", "not JSON"),
        ('{"count": 2, "gpus": 1}', "expected {count, milli, memoryMib}"),
        ('{"count": "2"}', "must be integers"),
        ('{"count": 2, "milli": 500}', "must ask for one device"),
        ('{"count": 0}', "device count must be >= 1"),
    ],
)
def test_bad_device_request_is_an_error(annotation: str, message: str) -> None:
    p = pod("p", flavor="huawei/Ascend910B3")
    p["metadata"]["annotations"][wire.DEVICE_REQUEST] = annotation
    with pytest.raises(DemandError, match=message):
        pod_demand(CATALOG, p)


def test_unknown_flavor_and_mixed_kinds_are_errors() -> None:
    with pytest.raises(DemandError, match="not in the accelerator catalog"):
        pod_demand(CATALOG, pod("p", flavor="acme/Warp9"))
    mixed = pod("p", resources={"nvidia.com/gpu": "1", "huawei.com/Ascend910B3": "1"})
    with pytest.raises(DemandError, match="several kinds"):
        pod_demand(CATALOG, mixed)


def test_pod_info_falls_back_to_requests_on_bad_annotations() -> None:
    p = pod("p", resources={"huawei.com/Ascend910B3": "2"}, node_name="n", devices="0,x")
    p["metadata"]["annotations"][wire.FLAVOR] = "acme/Warp9"
    info = pod_info(CATALOG, p)
    assert info.demand is not None and info.demand.request == DeviceRequest(2)
    assert info.devices is None  # malformed: counted conservatively
    assert info.node == "n" and info.active


def test_devices_annotation_round_trip() -> None:
    assert parse_devices(format_devices((0, 1, 8, 9))) == (0, 1, 8, 9)
    with pytest.raises(ValueError):
        parse_devices("1,1")
    assert parse_device_request('{"count": 3}') == DeviceRequest(3)
