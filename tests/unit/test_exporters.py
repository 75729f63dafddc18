"""Each vendor's exporter output, parsed through the catalog's telemetry profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_agents.agent.cli import parser as agent_parser
from cluster_agents.agent.exporters import ExporterTarget, Reading, device_readings, parse
from federation.catalog import Vendor, load_catalog
from federation.wire.agent import DeviceInfo, NodeInfo
from federation.wire.telemetry import decode_marks, encode_marks, load_band

DATA = Path(__file__).parent / "data" / "telemetry"
PROFILES = load_catalog().telemetry_profiles()
GIB = 1024


def _read(name: str, node: str = "") -> dict[int, Reading]:
    found = parse((DATA / name).read_text(), PROFILES, node)
    return {r.index: r for r in found}


# file, node the series name (or the endpoint's), vendor,
# device 0 and 1 as (utilization, memory used MiB, memory total MiB, temperature, fault)
CASES = [
    (
        "dcgm-exporter.txt",
        "gpu-node-1",
        Vendor.NVIDIA,
        (3.0, 1, 80615, 41.0, ""),
        (97.0, 79503, 80615, 67.0, "DCGM_FI_DEV_XID_ERRORS=79"),
    ),
    (
        "npu-exporter.txt",
        "npu-node-1",  # npu-exporter names no node: the endpoint's
        Vendor.HUAWEI,
        (0.0, 3396, 65536, 44.0, ""),
        (88.0, 61020, 65536, 58.0, "npu_chip_info_health_status=0"),
    ),
    (
        "mlu-exporter.txt",
        "mlu-node-1",
        Vendor.CAMBRICON,
        (12.0, 1 * GIB, 24 * GIB, 39.0, ""),
        (91.0, 20 * GIB, 24 * GIB, 52.0, ""),
    ),
    (
        "dcu-exporter.txt",
        "dcu-node-1",
        Vendor.HYGON,
        (0.0, 0, 64 * GIB, 46.0, ""),
        (76.0, 32 * GIB, 64 * GIB, 61.5, ""),
    ),
    (
        "ix-exporter.txt",
        "ix-node-1",
        Vendor.ILUVATAR,
        (5.0, 116, 64 * GIB, 37.0, ""),
        (64.0, 40 * GIB, 64 * GIB, 55.0, ""),
    ),
    (
        "gcu-exporter.txt",
        "gcu-node-1",
        Vendor.ENFLAME,
        (23.5, 512, 48 * GIB, 48.0, ""),
        (None, 0, 48 * GIB, None, "enflame_gcu_health=1"),  # -1: unsupported
    ),
]


@pytest.mark.parametrize(("name", "node", "vendor", "first", "second"), CASES)
def test_each_vendor_format(
    name: str,
    node: str,
    vendor: Vendor,
    first: tuple[float | None, int, int, float | None, str],
    second: tuple[float | None, int, int, float | None, str],
) -> None:
    readings = _read(name, node="npu-node-1")
    assert sorted(readings) == [0, 1]
    for index, expected in ((0, first), (1, second)):
        r = readings[index]
        assert (r.vendor, r.node) == (vendor, node)
        nodes = [
            NodeInfo(
                name=node,
                cpu_milli=1000,
                memory_mib=1024,
                devices=[
                    DeviceInfo(flavor=f"{vendor.value}/X", index=i, memory_mib=1) for i in (0, 1)
                ],
            )
        ]
        (device,) = [d for d in device_readings([r], nodes) if d.index == index]
        got = (
            device.utilization,
            device.memory_used_mib,
            device.memory_total_mib,
            device.temperature_c,
            device.fault,
        )
        assert got == expected
        assert device.flavor == f"{vendor.value}/X"


def test_series_of_devices_the_inventory_lacks_are_dropped() -> None:
    readings = list(_read("dcgm-exporter.txt").values())
    other_vendor = NodeInfo(
        name="gpu-node-1",
        cpu_milli=1,
        memory_mib=1,
        devices=[DeviceInfo(flavor="huawei/Ascend910B3", index=0, memory_mib=1)],
    )
    assert device_readings(readings, [other_vendor]) == []
    one_gpu = other_vendor.model_copy(
        update={"devices": [DeviceInfo(flavor="nvidia/A100-80GB", index=0, memory_mib=1)]}
    )
    assert [d.index for d in device_readings(readings, [one_gpu])] == [0]


def test_unrecognized_or_broken_text() -> None:
    assert parse("some_other_metric 1\n", PROFILES, "n") == []
    assert parse('DCGM_FI_DEV_GPU_UTIL{gpu="x",Hostname="n"} 5\n', PROFILES) == []
    with pytest.raises(ValueError):
        parse('DCGM_FI_DEV_GPU_UTIL{gpu="0" 5\n', PROFILES)


def test_node_annotation_round_trip() -> None:
    marks = {"nvidia/A100-80GB": ((0, 90, None), frozenset({2}))}
    assert decode_marks(encode_marks(marks)) == marks
    assert decode_marks("not json") == {}
    assert decode_marks('{"x": {"load": ["a"]}}') == {}
    assert [load_band(u) for u in (0, 4.9, 5, 94, 96, 100)] == [0, 0, 10, 90, 100, 100]


def test_exporter_flags_and_pods() -> None:
    args = agent_parser().parse_args(
        [
            "--hub=http://h",
            "--cluster=c",
            "--exporter=http://dcgm:9400/metrics",
            "--exporter=npu-1=http://10.0.0.7:8082/metrics",
            "--exporter-pods=app=dcgm-exporter,tier in (gpu):9400",
            "--exporter-pods=app=npu:8082/stats",
        ]
    )
    assert args.exporter == [
        ExporterTarget("http://dcgm:9400/metrics"),
        ExporterTarget("http://10.0.0.7:8082/metrics", "npu-1"),
    ]
    dcgm, npu = args.exporter_pods
    assert (dcgm.selector, dcgm.port, dcgm.path) == (
        "app=dcgm-exporter,tier in (gpu)",
        9400,
        "/metrics",
    )
    assert (npu.port, npu.path) == (8082, "/stats")
    for bad in ("--exporter=dcgm:9400", "--exporter-pods=app=x", "--exporter-pods=app=x:99999"):
        with pytest.raises(SystemExit):
            agent_parser().parse_args(["--hub=http://h", "--cluster=c", bad])
    pods = [
        {"status": {"phase": "Running", "podIP": "10.1.2.3"}, "spec": {"nodeName": "n1"}},
        {"status": {"phase": "Running", "podIP": "fd00::7"}, "spec": {"nodeName": "n2"}},
        {"status": {"phase": "Pending"}, "spec": {"nodeName": "n3"}},
    ]
    assert npu.targets(pods) == [
        ExporterTarget("http://10.1.2.3:8082/stats", "n1"),
        ExporterTarget("http://[fd00::7]:8082/stats", "n2"),
    ]
