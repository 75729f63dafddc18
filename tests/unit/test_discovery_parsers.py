"""Vendor tool parsers on recorded (or reconstructed, see each parser) sample outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster_agents.discovery.devices import Probe
from cluster_agents.discovery.text import key_value_blocks, mib, table_blocks
from cluster_agents.discovery.tools import (
    PROBES,
    cnmon,
    efsmi,
    hy_smi,
    ixsmi,
    mthreads_gmi,
    mx_smi,
    npu_smi,
    nvidia_smi,
    xpu_smi,
)
from federation.catalog.types import Vendor

DATA = Path(__file__).parent / "data" / "discovery"


def sample(*names: str) -> list[str]:
    return [(DATA / name).read_text() for name in names]


# probe, sample files, vendor, product, memory MiB per device, unhealthy indices, groups
CASES = [
    (
        nvidia_smi.PROBE,
        ("nvidia-smi-query.csv", "nvidia-smi-topo-nvswitch.txt"),
        Vendor.NVIDIA,
        ["NVIDIA H100 80GB HBM3"] * 8,
        [81559] * 5 + [0] + [81559] * 2,
        {5},
        [0] * 8,
    ),
    (
        npu_smi.PROBE,
        ("npu-smi-910b3.txt",),
        Vendor.HUAWEI,
        ["910B3"] * 8,
        [65536] * 8,
        {5},
        [None] * 8,
    ),
    (
        npu_smi.PROBE,
        ("npu-smi-a3.txt",),
        Vendor.HUAWEI,
        ["Ascend910"] * 4,
        [65536] * 4,
        {3},
        [0, 0, 1, 1],
    ),
    (
        npu_smi.PROBE,
        ("npu-smi-310p-duo.txt",),
        Vendor.HUAWEI,
        ["310P3"] * 2,
        [44280, 43693],
        set(),
        [1, 1],
    ),
    (
        cnmon.PROBE,
        ("cnmon-info.txt",),
        Vendor.CAMBRICON,
        ["MLU370-X8"] * 3,
        [23374, 23374, 0],
        {2},
        [None] * 3,
    ),
    (
        hy_smi.PROBE,
        ("hy-smi.txt",),
        Vendor.HYGON,
        ["K100_AI"] * 3,
        [65520, 65520, 0],
        {2},
        [None] * 3,
    ),
    (xpu_smi.PROBE, ("xpu_smi.txt",), Vendor.KUNLUNXIN, ["P800"] * 8, [98304] * 8, {6}, [None] * 8),
    (
        ixsmi.PROBE,
        ("ixsmi-query.csv",),
        Vendor.ILUVATAR,
        ["Iluvatar BI-V150"] * 4,
        [65536] * 3 + [0],
        {3},
        [None] * 4,
    ),
    (
        mthreads_gmi.PROBE,
        ("mthreads-gmi.txt",),
        Vendor.MTHREADS,
        ["MTT S4000"] * 4,
        [49152] * 3 + [0],
        {3},
        [None] * 4,
    ),
    (
        mx_smi.PROBE,
        ("mx-smi.txt",),
        Vendor.METAX,
        ["MetaX C500"] * 4,
        [65536] * 3 + [0],
        {3},
        [None] * 4,
    ),
    (efsmi.PROBE, ("efsmi-q.txt",), Vendor.ENFLAME, ["S60"] * 3, [49120] * 3, {2}, [None] * 3),
]


@pytest.mark.parametrize(
    ("probe", "files", "vendor", "products", "memory", "unhealthy", "groups"),
    [pytest.param(*case, id=case[1][0]) for case in CASES],
)
def test_parser_reads_sample(
    probe: Probe,
    files: tuple[str, ...],
    vendor: Vendor,
    products: list[str],
    memory: list[int],
    unhealthy: set[int],
    groups: list[int | None],
) -> None:
    devices = probe.parse(sample(*files))
    assert len(probe.commands) == len(files)
    assert [d.vendor for d in devices] == [vendor] * len(products)
    assert [d.model for d in devices] == products
    assert [d.index for d in devices] == list(range(len(products)))
    assert [d.memory_mib for d in devices] == memory
    assert {d.index for d in devices if not d.healthy} == unhealthy
    assert [d.group for d in devices] == groups
    assert len({d.uuid for d in devices}) == len(devices)  # ids are unique and present
    assert all(d.uuid for d in devices)


def test_every_vendor_tool_has_a_probe() -> None:
    assert {p.vendor for p in PROBES} == set(Vendor) - {Vendor.BIREN}  # Biren: no tool given
    assert all(p.tool == command[0] for p in PROBES for command in p.commands)


def test_nvidia_uuid_and_odd_spacing() -> None:
    devices = nvidia_smi.PROBE.parse(sample("nvidia-smi-query.csv", "nvidia-smi-topo-pcie.txt"))
    assert devices[4].uuid == "GPU-2e9d5a13-7b4c-4e1a-9f6d-3c8b0a2e5f55"  # "   GPU-... ," row
    assert devices[3].memory_mib == 81559  # row without spaces


@pytest.mark.parametrize(
    ("topo", "groups"),
    [
        ("nvidia-smi-topo-nvswitch.txt", dict.fromkeys(range(8), 0)),  # one NVSwitch island
        ("nvidia-smi-topo-pairs.txt", {0: 0, 1: 0, 2: 1, 3: 1}),  # NVLink bridges, ANSI header
        ("nvidia-smi-topo-pcie.txt", {0: 0, 1: 0, 2: 1, 3: 1}),  # no NVLink: NUMA affinity
    ],
)
def test_nvidia_topology_groups(topo: str, groups: dict[int, int]) -> None:
    assert nvidia_smi.topology_groups(*sample(topo)) == groups


def test_nvidia_topology_without_matrix() -> None:
    assert nvidia_smi.topology_groups("NVIDIA-SMI has failed\n") == {}


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.tool)
def test_unrelated_output_gives_no_devices(probe: Probe) -> None:
    noise = "No devices were found\n+-----+\n| a | b |\n"
    assert probe.parse([noise] * len(probe.commands)) == []


def test_table_blocks() -> None:
    text = "+---+---+\n| 0   A | OK |\n|  1 |  x|\n+===+===+\nfree line\n\n 0  B  |bus| m \n"
    assert table_blocks(text) == [
        [["0   A", "OK"], ["1", "x"]],
        [["free line"]],
        [["0  B", "bus", "m"]],
    ]


def test_key_value_blocks_nest_sections_by_indent() -> None:
    text = (
        "banner : ignored\nDev 0\nName : X\nMem :\n  Total : 5 MiB\n  Used : 1 MiB\n"
        "Other : y\nDev 1\n  Info\n    Name : Y\n"
    )
    assert key_value_blocks(text, re.compile(r"^Dev (\d+)$")) == {
        0: {"name": "X", "mem/total": "5 MiB", "mem/used": "1 MiB", "other": "y"},
        1: {"info/name": "Y"},
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("81559", 81559),
        ("23374 MiB", 23374),
        ("64 GB", 65536),
        ("68702699520 B", 65520),
        ("2048 KiB", 2),
        ("N/A", None),
        ("ERR!", None),
        ("12 parsecs", None),
    ],
)
def test_mib(text: str, value: int | None) -> None:
    assert mib(text) == value
