"""`suanpan top`: devices summed per cluster, vendor or node, with live telemetry."""

from __future__ import annotations

from typing import Any

from api.cli import parser, top_rows


def _device(cluster: str, node: str, flavor: str, index: int, **kw: Any) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "region": "",
        "node": node,
        "flavor": flavor,
        "vendor": flavor.split("/")[0],
        "index": index,
        "healthy": kw.get("healthy", True),
        "allocatedMilli": kw.get("allocated", 0),
        "memoryMib": 81920,
        "utilization": kw.get("util"),
        "memoryUsedMib": kw.get("mem"),
        "temperatureC": kw.get("temp"),
        "fault": "",
        "reportedAt": None,
    }


DEVICES = [
    _device("bj", "n1", "nvidia/H100-80GB", 0, allocated=1000, util=90.0, mem=40960, temp=70.0),
    _device("bj", "n1", "nvidia/H100-80GB", 1, allocated=500, util=10.0, mem=2048, temp=40.0),
    _device("bj", "n2", "nvidia/H100-80GB", 0, healthy=False),
    _device("sh", "a1", "huawei/Ascend910B3", 0, util=50.0),
]


def test_by_cluster_vendor_and_model() -> None:
    rows, header = top_rows(DEVICES, "cluster")
    assert header[:3] == ["CLUSTER", "VENDOR", "MODEL"]
    assert rows == [
        ["bj", "nvidia", "H100-80GB", 3, "1.5", 1, 2, "50%", "42 GiB", "70C"],
        ["sh", "huawei", "Ascend910B3", 1, "0", 0, 1, "50%", "-", "-"],
    ]


def test_by_node_and_by_vendor() -> None:
    rows, header = top_rows(DEVICES, "node")
    assert header[:4] == ["CLUSTER", "NODE", "VENDOR", "MODEL"]
    assert [r[:4] + r[6:8] for r in rows][1] == ["bj", "n2", "nvidia", "H100-80GB", 1, 0]
    rows, _ = top_rows(DEVICES, "vendor")
    assert [r[:3] for r in rows] == [["huawei", "Ascend910B3", 1], ["nvidia", "H100-80GB", 3]]
    assert rows[1][6] == "50%"


def test_flags() -> None:
    args = parser().parse_args(["top", "--by", "node", "--vendor", "nvidia"])
    assert (args.by, args.vendor, args.cluster) == ("node", "nvidia", None)
