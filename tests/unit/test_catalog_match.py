"""User-facing look-ups on the catalog: match patterns, keys, speeds, managed resources."""

from __future__ import annotations

import pytest

from federation.catalog import Catalog, Vendor, load_catalog
from federation.catalog import labels as L


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        ("huawei/Ascend910B3", ["huawei/Ascend910B3"]),
        ("HUAWEI/ascend910b3", ["huawei/Ascend910B3"]),
        ("huawei/910B3", ["huawei/Ascend910B3"]),  # alias
        (
            "huawei/*",
            [
                "huawei/Ascend310P",
                "huawei/Ascend910A",
                "huawei/Ascend910B2",
                "huawei/Ascend910B3",
                "huawei/Ascend910B4",
                "huawei/Ascend910C",
            ],
        ),
        ("huawei/Ascend910B*", ["huawei/Ascend910B2", "huawei/Ascend910B3", "huawei/Ascend910B4"]),
        ("nvidia/H100*", ["nvidia/H100-80GB"]),
        ("nvidia/A100*", ["nvidia/A100-40GB", "nvidia/A100-80GB"]),
        ("V100M32", ["nvidia/V100-32GB"]),  # openb trace name, vendor omitted
        ("v100m16", ["nvidia/V100-16GB"]),
        ("*/MLU*", ["cambricon/MLU370-X8", "cambricon/MLU590"]),
        ("G1", ["nvidia/G1"]),
        ("nvidia/B200", []),
        ("acme/*", []),
        ("", []),
        ("nvidia/", []),
    ],
)
def test_match(catalog: Catalog, spec: str, keys: list[str]) -> None:
    assert [m.key for m in catalog.match(spec)] == keys


def test_get_and_speed(catalog: Catalog) -> None:
    assert catalog.get("nvidia/h100-80gb") is catalog.models["nvidia/H100-80GB"]
    assert catalog.get("nvidia/B200") is None
    assert catalog.speed("nvidia/A100-80GB") == 1.0
    assert catalog.speed("nvidia/H100-80GB") == pytest.approx(989.4 / 312, abs=1e-3)
    with pytest.raises(KeyError, match="unknown accelerator model 'nvidia/B200'"):
        catalog.speed("nvidia/B200")


def test_managed_resources_cover_whole_and_sharing_names(catalog: Catalog) -> None:
    managed = set(catalog.managed_resources())
    assert {
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
        "huawei.com/Ascend910",
        "huawei.com/Ascend910B3",
        "huawei.com/Ascend910B3-memory",
        "huawei.com/Ascend910B3-core",
        "cambricon.com/mlu",
        "cambricon.com/vmlu",
        "hygon.com/dcunum",
        "kunlunxin.com/vxpu-memory",
        "iluvatar.ai/BI-V150.vMem",
        "mthreads.com/sgpu-memory",
        "metax-tech.com/vmemory",
        "enflame.com/drs-gcu",
        "birentech.com/gpu",
    } <= managed
    assert list(catalog.managed_resources()) == sorted(managed)


@pytest.mark.parametrize(
    ("vendor", "product", "key"),
    [
        (Vendor.NVIDIA, "NVIDIA H100 80GB HBM3", "nvidia/H100-80GB"),
        (Vendor.NVIDIA, "NVIDIA A100-SXM4-80GB", "nvidia/A100-80GB"),
        (Vendor.NVIDIA, "NVIDIA H20", "nvidia/H20"),
        (Vendor.NVIDIA, "Tesla V100-SXM2-16GB", "nvidia/V100-16GB"),
        (Vendor.HUAWEI, "910B3", "huawei/Ascend910B3"),
        (Vendor.HUAWEI, "Ascend910", "huawei/Ascend910C"),
        (Vendor.HUAWEI, "310P3", "huawei/Ascend310P"),
        (Vendor.CAMBRICON, "MLU370-X8", "cambricon/MLU370-X8"),
        (Vendor.HYGON, "K100_AI", "hygon/K100-AI"),
        (Vendor.KUNLUNXIN, "P800", "kunlunxin/P800"),
        (Vendor.ILUVATAR, "Iluvatar BI-V150", "iluvatar/BI-V150"),
        (Vendor.MTHREADS, "MTT S4000", "mthreads/MTT-S4000"),
        (Vendor.METAX, "MetaX C500", "metax/MXC500"),
        (Vendor.ENFLAME, "S60", "enflame/S60"),
        (Vendor.BIREN, "BR104", "biren/BR104"),
    ],
)
def test_identify_product(catalog: Catalog, vendor: Vendor, product: str, key: str) -> None:
    model = catalog.identify_product(vendor, product)
    assert model is not None and model.key == key


@pytest.mark.parametrize(
    ("vendor", "product"),
    [(Vendor.NVIDIA, "NVIDIA H200"), (Vendor.NVIDIA, "NVIDIA B200"), (Vendor.HUAWEI, "A100")],
)
def test_identify_unknown_product(catalog: Catalog, vendor: Vendor, product: str) -> None:
    assert catalog.identify_product(vendor, product) is None


def test_every_model_is_complete(catalog: Catalog) -> None:
    for model in catalog.models.values():
        assert model.memory_mib > 0 and model.fp16_tflops > 0 and model.speed > 0, model.key
        assert model.tolerations, model.key
        if model.sharing.enabled:
            assert model.sharing.share_resource, model.key


@pytest.mark.parametrize(
    ("groups", "value"),
    [
        ([[0, 1, 2, 3], [4, 5, 6, 7]], "0-3_4-7"),
        ([[1, 3], [0, 2]], "0.2_1.3"),
        ([[0, 1], [2, 3], [4, 5], [6, 7]], "0-1_2-3_4-5_6-7"),
        ([[5]], "5"),
        ([[0, 1, 2, 5, 6, 9]], "0-2.5-6.9"),
    ],
)
def test_topology_group_labels_round_trip(groups: list[list[int]], value: str) -> None:
    assert L.encode_groups(groups) == value
    assert L.decode_groups(value) == tuple(tuple(sorted(g)) for g in sorted(groups))


@pytest.mark.parametrize("value", ["", "a", "3-1", "0-3_"])
def test_bad_topology_group_label(value: str) -> None:
    with pytest.raises(ValueError):
        L.decode_groups(value)
