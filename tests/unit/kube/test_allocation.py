"""Per vendor mechanism: the exact annotations a device plugin reads for the chosen devices."""

from __future__ import annotations

import json

from cluster_agents.kube.allocation import allocation_annotations, device_ids, registered_ids
from cluster_agents.kube.occupancy import node_inventory
from federation.catalog import DeviceAllocation, load_catalog
from federation.scheduling.devices import DeviceRequest

CATALOG = load_catalog()
NOW = 1_767_000_000.7


def record(model: str, resource: str = "") -> DeviceAllocation:
    m = CATALOG.models[model]
    found = m.allocation_for(resource or m.resource)
    assert found is not None
    return found


def encode(
    allocation: DeviceAllocation,
    ids: list[str],
    request: DeviceRequest,
    memory_mib: int,
    slot: int = 0,
    slots: int = 1,
) -> dict[str, str]:
    return allocation_annotations(
        allocation,
        ids=ids,
        request=request,
        device_memory_mib=memory_mib,
        node="n1",
        slot=slot,
        slots=slots,
        now=NOW,
    )


def test_hami_nvidia_whole_devices_name_each_uuid_with_full_memory_and_cores() -> None:
    notes = encode(record("nvidia/H100-80GB"), ["GPU-a", "GPU-b"], DeviceRequest(2), 81559)
    assert notes == {
        "hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,81559,100:GPU-b,NVIDIA,81559,100:;",
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": "1767000000",
        "hami.io/bind-time": "1767000000",
        "hami.io/bind-phase": "allocating",
    }


def test_hami_share_carries_its_memory_and_core_percent_in_its_container_slot() -> None:
    notes = encode(record("nvidia/H100-80GB"), ["GPU-c"], DeviceRequest(1, 500, 20000), 81559, 1, 3)
    assert notes["hami.io/vgpu-devices-to-allocate"] == ";GPU-c,NVIDIA,20000,50:;;"
    without_memory = encode(record("nvidia/H100-80GB"), ["GPU-c"], DeviceRequest(1, 250), 81559)
    assert without_memory["hami.io/vgpu-devices-to-allocate"] == "GPU-c,NVIDIA,20389,25:;"


def test_hami_ascend_uses_the_chip_common_word() -> None:
    notes = encode(record("huawei/Ascend910B3"), ["npu-4", "npu-5"], DeviceRequest(2), 65536)
    assert notes["hami.io/Ascend910B3-devices-to-allocate"] == (
        "npu-4,Ascend910B3,65536,100:npu-5,Ascend910B3,65536,100:;"
    )


def test_mindcluster_names_the_chips_and_the_predicate_time() -> None:
    notes = encode(
        record("huawei/Ascend910B3", "huawei.com/Ascend910"),
        ["Ascend910-2", "Ascend910-3"],
        DeviceRequest(2),
        65536,
    )
    assert notes == {
        "huawei.com/Ascend910": "Ascend910-2,Ascend910-3",
        "predicate-time": "1767000000",
    }


def test_visible_env_writes_the_ids_for_the_containers_variable() -> None:
    kunlun = record("kunlunxin/P800")
    notes = encode(kunlun, ["4", "5", "6", "7"], DeviceRequest(4), 98304)
    assert notes == {"suanpan.io/visible-devices": "4,5,6,7"}
    assert kunlun.env == "XPU_VISIBLE_DEVICES"


def test_ids_come_from_the_register_annotation_by_index_else_from_the_pattern() -> None:
    hami = record("nvidia/H100-80GB")
    register = json.dumps(
        [{"id": "GPU-b", "index": 1, "count": 10}, {"id": "GPU-a", "count": 10}]
    )  # index 0 is omitted, as HAMi's omitempty JSON does
    notes = {"hami.io/node-nvidia-register": register}
    assert device_ids(hami, "n1", notes, 3) == ("GPU-a", "GPU-b", "GPU-n1-2")
    legacy = {"hami.io/node-nvidia-register": "GPU-x,10,81920,100,NVIDIA-H100,0,true:GPU-y,10,"}
    assert registered_ids(hami, legacy) == ["GPU-x", "GPU-y"]
    assert device_ids(hami, "n1", {}, 2) == ("GPU-n1-0", "GPU-n1-1")
    mind = record("huawei/Ascend910B3", "huawei.com/Ascend910")
    chips = {"huawei.com/Ascend910": "Ascend910-0,Ascend910-1"}
    assert device_ids(mind, "n", chips, 3) == ("Ascend910-0", "Ascend910-1", "Ascend910-2")


def test_node_inventory_carries_ids_for_the_nodes_protocol() -> None:
    register = json.dumps([{"id": f"GPU-{i}", "index": i} for i in range(8)])
    node = {
        "metadata": {
            "name": "g",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "annotations": {"hami.io/node-nvidia-register": register},
        },
        "status": {"allocatable": {"nvidia.com/gpu": "80"}, "capacity": {"nvidia.com/gpu": "80"}},
    }
    inventory = node_inventory(CATALOG, node)
    (resolved,) = inventory.devices
    assert resolved.count == 8  # HAMi's split count: 80 = 8 GPUs x 10
    allocation, ids = inventory.allocation(resolved)
    assert allocation is not None and allocation.kind == "hami"
    assert ids == tuple(f"GPU-{i}" for i in range(8))
