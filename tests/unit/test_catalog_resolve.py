"""Node and pod resolution: realistic labels and extended resources of every vendor."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from federation.catalog import (
    Catalog,
    ResolvedDevices,
    TopologyRule,
    UnrecognizedResource,
    load_catalog,
    pod_device_usage,
    resolve_node,
)
from federation.catalog import labels as L


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


BASE = {
    "cpu": "96",
    "memory": "1Ti",
    "pods": "110",
    "hugepages-1Gi": "0",
    "ephemeral-storage": "1T",
}


def discovered(vendor: str, model: str, **extra: str) -> dict[str, str]:
    return {L.VENDOR: vendor, L.MODEL: model, **{getattr(L, k): v for k, v in extra.items()}}


NODES: list[tuple[str, dict[str, str], dict[str, str], str, int]] = [
    # name, labels, extra allocatable, expected model key, expected count
    (
        "dgx-h100",
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        {"nvidia.com/gpu": "8"},
        "nvidia/H100-80GB",
        8,
    ),
    (
        "a100-pcie",
        {"nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe"},
        {"nvidia.com/gpu": "4"},
        "nvidia/A100-80GB",
        4,
    ),
    (
        "a100-40",
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        {"nvidia.com/gpu": "8"},
        "nvidia/A100-40GB",
        8,
    ),
    ("h800", {"nvidia.com/gpu.product": "NVIDIA-H800"}, {"nvidia.com/gpu": "8"}, "nvidia/H800", 8),
    ("h20", {"nvidia.com/gpu.product": "NVIDIA-H20"}, {"nvidia.com/gpu": "8"}, "nvidia/H20", 8),
    ("l40s", {"nvidia.com/gpu.product": "NVIDIA-L40S"}, {"nvidia.com/gpu": "4"}, "nvidia/L40S", 4),
    ("a10", {"nvidia.com/gpu.product": "NVIDIA-A10"}, {"nvidia.com/gpu": "2"}, "nvidia/A10", 2),
    ("t4", {"nvidia.com/gpu.product": "Tesla-T4"}, {"nvidia.com/gpu": "1"}, "nvidia/T4", 1),
    (
        "v100-16",
        {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB"},
        {"nvidia.com/gpu": "8"},
        "nvidia/V100-16GB",
        8,
    ),
    (
        "v100-32",
        {"nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB"},
        {"nvidia.com/gpu": "8"},
        "nvidia/V100-32GB",
        8,
    ),
    (
        "p100",
        {"nvidia.com/gpu.product": "Tesla-P100-PCIE-16GB"},
        {"nvidia.com/gpu": "2"},
        "nvidia/P100",
        2,
    ),
    ("openb-g2", discovered("nvidia", "G2"), {"nvidia.com/gpu": "8"}, "nvidia/G2", 8),
    (
        "910b3-hami",
        {},
        {"huawei.com/Ascend910B3": "8", "huawei.com/Ascend910B3-memory": "524288"},
        "huawei/Ascend910B3",
        8,
    ),
    (
        "910b4-mindcluster",
        {
            "accelerator": "huawei-Ascend910",
            "accelerator-type": "module-910b-8",
            "node.kubernetes.io/npu.chip.name": "910B4",
        },
        {"huawei.com/Ascend910": "8"},
        "huawei/Ascend910B4",
        8,
    ),
    ("910b2-hami", {}, {"huawei.com/Ascend910B2": "8"}, "huawei/Ascend910B2", 8),
    (
        "910a-module",
        {"accelerator": "huawei-Ascend910", "accelerator-type": "module"},
        {"huawei.com/Ascend910": "8"},
        "huawei/Ascend910A",
        8,
    ),
    (
        "910c-a3",
        {"accelerator": "huawei-Ascend910", "accelerator-type": "module-a3-16"},
        {"huawei.com/Ascend910": "16"},
        "huawei/Ascend910C",
        16,
    ),
    (
        "310p",
        {"accelerator": "huawei-Ascend310P", "servertype": "Ascend310P-10-dual"},
        {"huawei.com/Ascend310P": "4"},
        "huawei/Ascend310P",
        4,
    ),
    (
        "mlu370",
        {"cambricon.com/mlu.model": "MLU370-X8"},
        {"cambricon.com/mlu": "8"},
        "cambricon/MLU370-X8",
        8,
    ),
    ("mlu590-typed", {}, {"cambricon.com/mlu590": "8"}, "cambricon/MLU590", 8),
    ("k100", {"hygon.com/dcu.name": "K100_AI"}, {"hygon.com/dcu": "8"}, "hygon/K100-AI", 8),
    (
        "z100-hami",
        discovered("hygon", "Z100", COUNT="8"),
        {"hygon.com/dcunum": "8", "hygon.com/dcumem": "262144"},
        "hygon/Z100",
        8,
    ),
    ("p800", {}, {"kunlunxin.com/xpu": "8"}, "kunlunxin/P800", 8),
    ("bi-v150", discovered("iluvatar", "BI-V150"), {"iluvatar.ai/gpu": "8"}, "iluvatar/BI-V150", 8),
    (
        "bi-v100-hami",
        {},
        {"iluvatar.ai/BI-V100-vgpu": "4", "iluvatar.ai/BI-V100.vMem": "512"},
        "iluvatar/BI-V100",
        4,
    ),
    ("s4000", {}, {"mthreads.com/gpu": "8"}, "mthreads/MTT-S4000", 8),
    ("c500", {}, {"metax-tech.com/gpu": "8"}, "metax/MXC500", 8),
    ("s60", {"enflame.com/gcu.model": "S60"}, {"enflame.com/gcu": "8"}, "enflame/S60", 8),
    ("br104", discovered("biren", "BR104"), {"birentech.com/gpu": "8"}, "biren/BR104", 8),
]


@pytest.mark.parametrize(
    ("labels", "allocatable", "key", "count"),
    [pytest.param(*node[1:], id=node[0]) for node in NODES],
)
def test_every_vendor_node_resolves_to_model_and_count(
    catalog: Catalog, labels: dict[str, str], allocatable: dict[str, str], key: str, count: int
) -> None:
    [devices] = resolve_node(catalog, labels, {}, {**BASE, **allocatable})
    assert isinstance(devices, ResolvedDevices)
    assert (devices.model.key, devices.count) == (key, count)
    assert devices.memory_mib == devices.model.memory_mib


def one(result: list[ResolvedDevices | UnrecognizedResource]) -> ResolvedDevices:
    [devices] = result
    assert isinstance(devices, ResolvedDevices)
    return devices


def test_topology_follows_node_labels_and_size(catalog: Catalog) -> None:
    x16 = TopologyRule(8, frozenset({*range(1, 9), 10, 12, 14, 16}), "even_split")
    labels = {"accelerator-type": "module-910b-16", "node.kubernetes.io/npu.chip.name": "910B3"}
    assert one(resolve_node(catalog, labels, {}, {"huawei.com/Ascend910": "16"})).topology == x16
    # without the label, 16 devices still mean the Box16 chassis
    assert one(resolve_node(catalog, {}, {}, {"huawei.com/Ascend910B3": "16"})).topology == x16
    assert one(resolve_node(catalog, {}, {}, {"huawei.com/Ascend910B3": "8"})).topology == (
        TopologyRule()
    )
    p800 = one(resolve_node(catalog, {}, {}, {"kunlunxin.com/xpu": "8"}))
    assert p800.topology == TopologyRule(4, frozenset({1, 2, 4, 8}), "whole_groups")


def test_memory_and_groups_from_discovery_beat_product_labels(catalog: Catalog) -> None:
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/gpu.memory": "40960",
        **discovered("nvidia", "A100-80GB", MEMORY_MIB="81559", TOPOLOGY_GROUPS="0-3_4-7"),
    }
    devices = one(resolve_node(catalog, labels, {}, {"nvidia.com/gpu": "8"}))
    assert devices.model.key == "nvidia/A100-80GB"
    assert devices.memory_mib == 81559
    assert devices.groups == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_feature_discovery_memory_label(catalog: Catalog) -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}
    assert one(resolve_node(catalog, labels, {}, {"nvidia.com/gpu": "8"})).memory_mib == 81559


def test_hami_split_count(catalog: Catalog) -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    annotations = {"hami.io/node-nvidia-register": "[]", "hami.io/node-handshake": "Reported_x"}
    allocatable = {"nvidia.com/gpu": "80", "nvidia.com/gpumem": "655360"}
    assert one(resolve_node(catalog, labels, annotations, allocatable)).count == 8
    labels |= discovered("nvidia", "A100-80GB", COUNT="7")  # one GPU fell off the bus
    assert one(resolve_node(catalog, labels, annotations, allocatable)).count == 7
    # without HAMi's register annotation, nvidia.com/gpu counts physical GPUs
    assert one(resolve_node(catalog, labels, {}, {"nvidia.com/gpu": "8"})).count == 8


def test_one_entry_per_model_main_resource_wins(catalog: Catalog) -> None:
    allocatable = {"huawei.com/Ascend910": "8", "huawei.com/Ascend910B3": "8"}
    labels = {"node.kubernetes.io/npu.chip.name": "910B3"}
    devices = one(resolve_node(catalog, labels, {}, allocatable))
    assert devices.resource == "huawei.com/Ascend910B3"


def test_unrecognized_accelerators_are_reported(catalog: Catalog) -> None:
    allocatable = {
        **BASE,
        "nvidia.com/gpu": "8",  # no label names the model
        "nvidia.com/mig-1g.10gb": "7",
        "amd.com/gpu": "4",
        "huawei.com/Ascend910": "x",
        "example.com/dongle": "1",  # not an accelerator vendor: ignored
        "nvidia.com/gpumem": "10000",  # sharing resource: not a device count
        "cambricon.com/mlu": "0",  # plugin present, no device
    }
    result = resolve_node(catalog, {}, {}, allocatable)
    assert all(isinstance(r, UnrecognizedResource) for r in result)
    by_name = {r.resource: r for r in result if isinstance(r, UnrecognizedResource)}
    assert set(by_name) == {
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "amd.com/gpu",
        "huawei.com/Ascend910",
    }
    assert by_name["nvidia.com/gpu"].count == 8
    assert "nvidia/A100-40GB" in by_name["nvidia.com/gpu"].reason
    assert by_name["nvidia.com/mig-1g.10gb"].reason == "no catalog model uses it"
    assert by_name["huawei.com/Ascend910"].reason == "bad allocatable 'x'"


def test_no_accelerators(catalog: Catalog) -> None:
    assert resolve_node(catalog, {"kubernetes.io/os": "linux"}, {}, BASE) == []


@pytest.mark.parametrize(
    ("containers", "init", "usage"),
    [
        (
            [
                {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "8000", "cpu": "4"},
                {"nvidia.com/gpu": "1"},
            ],
            [],
            {"nvidia.com/gpu": 3},
        ),
        (
            [{"huawei.com/Ascend910B3": "4", "huawei.com/Ascend910B3-memory": "16384"}],
            [],
            {"huawei/Ascend910B3": 4},
        ),
        (
            [{"huawei.com/Ascend910B3": "2"}],
            [{"huawei.com/Ascend910B3": "4"}],
            {"huawei/Ascend910B3": 4},
        ),
        (
            [{"huawei.com/Ascend910B3": "2"}, {"huawei.com/Ascend910B3": "4"}],
            [{"huawei.com/Ascend910B3": "4"}],
            {"huawei/Ascend910B3": 6},
        ),
        (
            [{"iluvatar.ai/BI-V100-vgpu": "1", "iluvatar.ai/BI-V100.vMem": "64"}],
            [],
            {"iluvatar/BI-V100": 1},
        ),
        (
            [{"kunlunxin.com/xpu": "8"}, {"amd.com/gpu": "1"}],
            [],
            {"kunlunxin/P800": 8, "amd.com/gpu": 1},
        ),
        ([{"cpu": "1", "memory": "1Gi"}], [], {}),
    ],
)
def test_pod_device_usage(
    catalog: Catalog,
    containers: list[Mapping[str, str]],
    init: list[Mapping[str, str]],
    usage: dict[str, int],
) -> None:
    assert pod_device_usage(catalog, containers, init) == usage


def test_pod_device_usage_rejects_fractional_devices(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="500m"):
        pod_device_usage(catalog, [{"nvidia.com/gpu": "500m"}])
