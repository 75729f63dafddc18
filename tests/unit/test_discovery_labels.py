"""Node labels computed from discovered devices, and their round trip into the resolver."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.node_labels import compute_labels, label_value, labels_patch
from cluster_agents.discovery.tools import PROBES, npu_smi, nvidia_smi, xpu_smi
from federation.catalog import Catalog, ResolvedDevices, Vendor, load_catalog, resolve_node
from federation.catalog import labels as L

DATA = Path(__file__).parent / "data" / "discovery"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def parsed(probe: Probe, *files: str) -> list[DiscoveredDevice]:
    return probe.parse([(DATA / f).read_text() for f in files])


def test_labels_for_nvidia_node(catalog: Catalog) -> None:
    devices = parsed(nvidia_smi.PROBE, "nvidia-smi-query.csv", "nvidia-smi-topo-nvswitch.txt")
    assert compute_labels(devices, catalog) == {
        L.VENDOR: "nvidia",
        L.MODEL: "H100-80GB",
        L.COUNT: "7",  # GPU 5 needs a reset
        L.MEMORY_MIB: "81559",
        L.TOPOLOGY_GROUPS: "0-7",
    }


def test_labels_for_ascend_a3_node_group_modules(catalog: Catalog) -> None:
    labels = compute_labels(parsed(npu_smi.PROBE, "npu-smi-a3.txt"), catalog)
    assert labels[L.MODEL] == "Ascend910C"
    assert labels[L.COUNT] == "3"
    assert labels[L.TOPOLOGY_GROUPS] == "0-1_2-3"


def test_labels_without_groups(catalog: Catalog) -> None:
    labels = compute_labels(parsed(xpu_smi.PROBE, "xpu_smi.txt"), catalog)
    assert labels == {
        L.VENDOR: "kunlunxin",
        L.MODEL: "P800",
        L.COUNT: "7",
        L.MEMORY_MIB: "98304",
    }


def device(
    model: str, index: int, *, healthy: bool = True, vendor: Vendor = Vendor.NVIDIA
) -> DiscoveredDevice:
    return DiscoveredDevice(
        vendor, model, index, f"id-{model}-{index}", 1000 + index, None, healthy
    )


def test_unknown_product_is_made_label_safe(catalog: Catalog) -> None:
    labels = compute_labels([device("NVIDIA GB300 (preview)", 0)], catalog)
    assert labels[L.MODEL] == "NVIDIA-GB300-preview"


def test_all_unhealthy_has_no_memory(catalog: Catalog) -> None:
    labels = compute_labels([device("Tesla T4", 0, healthy=False)], catalog)
    assert labels == {L.VENDOR: "nvidia", L.MODEL: "T4", L.COUNT: "0"}


def test_mixed_node_labels_the_model_with_most_healthy_devices(catalog: Catalog) -> None:
    devices = [device("Tesla T4", 0), device("NVIDIA A10", 1), device("NVIDIA A10", 2)]
    assert compute_labels(devices, catalog)[L.MODEL] == "A10"


def test_no_devices_no_labels(catalog: Catalog) -> None:
    assert compute_labels([], catalog) == {}


@pytest.mark.parametrize(
    ("text", "value"),
    [("MTT S4000", "MTT-S4000"), ("-x-", "x"), ("ä" * 3 + "A", "A"), ("a" * 80, "a" * 63)],
)
def test_label_value(text: str, value: str) -> None:
    assert label_value(text) == value


def test_labels_patch() -> None:
    current = {L.VENDOR: "nvidia", L.MODEL: "A10", L.COUNT: "2", L.TOPOLOGY_GROUPS: "0-1"}
    desired = {L.VENDOR: "nvidia", L.MODEL: "A10", L.COUNT: "1", L.MEMORY_MIB: "24000"}
    assert labels_patch(current, desired) == {
        L.COUNT: "1",
        L.MEMORY_MIB: "24000",
        L.TOPOLOGY_GROUPS: None,
    }
    assert labels_patch(desired, desired) == {}
    assert labels_patch({"kubernetes.io/os": "linux"}, {}) == {}  # never touches other labels


def test_every_sample_labels_resolve_back_to_the_catalog_model(catalog: Catalog) -> None:
    """Discovery labels name catalog models the resolver accepts for the vendor's resource."""
    samples = {
        "nvidia-smi": ("nvidia-smi-query.csv", "nvidia-smi-topo-pairs.txt"),
        "npu-smi": ("npu-smi-910b3.txt",),
        "cnmon": ("cnmon-info.txt",),
        "hy-smi": ("hy-smi.txt",),
        "xpu_smi": ("xpu_smi.txt",),
        "ixsmi": ("ixsmi-query.csv",),
        "mthreads-gmi": ("mthreads-gmi.txt",),
        "mx-smi": ("mx-smi.txt",),
        "efsmi": ("efsmi-q.txt",),
    }
    for probe in PROBES:
        labels = compute_labels(parsed(probe, *samples[probe.tool]), catalog)
        model = catalog.get(f"{labels[L.VENDOR]}/{labels[L.MODEL]}")
        assert model is not None, (probe.tool, labels)
        [found] = resolve_node(catalog, labels, {}, {model.resource: labels[L.COUNT]})
        assert isinstance(found, ResolvedDevices)
        assert found.model == model
        assert found.memory_mib == int(labels[L.MEMORY_MIB])
