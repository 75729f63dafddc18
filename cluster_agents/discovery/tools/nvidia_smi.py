"""nvidia-smi: the GPU list from `--query-gpu` CSV, interconnect groups from `topo -m`.

Format recorded from nvidia-smi 535-560 (tests/unit/data/discovery/nvidia-smi-*). A GPU in
trouble prints "[GPU requires reset]" or "[Unknown Error]" in its fields: it is reported
unhealthy. The CSV reader is shared with ixsmi, whose `--query-gpu` output is the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import csv_rows, mib, strip_ansi
from federation.catalog.types import Vendor

QUERY = ("--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv,noheader,nounits")
_NVLINK = re.compile(r"^NV\d+$")


def parse_query(text: str, vendor: Vendor) -> list[DiscoveredDevice]:
    """Devices from `--query-gpu=index,uuid,name,memory.total,pci.bus_id` CSV rows."""
    devices = []
    for row in csv_rows(text):
        if len(row) != 5 or not row[0].isdigit():
            continue
        index, uuid, name, memory, bus_id = row
        total = mib(memory)
        devices.append(
            DiscoveredDevice(
                vendor=vendor,
                model=name,
                index=int(index),
                uuid=uuid if uuid.startswith("GPU-") else bus_id,
                memory_mib=total or 0,
                healthy=total is not None,
            )
        )
    return devices


def topology_groups(text: str) -> dict[int, int]:
    """GPU index -> group from a `nvidia-smi topo -m` matrix.

    GPUs joined by NVLink ("NV#") form a group (connected components; an NVSwitch system is one
    group). Without any NVLink, the NUMA affinity column is the group. Group ids are numbered
    0.. in order of their first GPU.
    """
    rows = [
        [cell.strip() for cell in re.split(r"\t+|\s{2,}", line.strip())]
        for line in strip_ansi(text).splitlines()
    ]
    start = next((i for i, r in enumerate(rows) if r[0] == "GPU0"), None)
    if start is None:
        return {}
    header = rows[start]
    matrix = {
        int(r[0][3:]): dict(zip(header, r[1:], strict=False))
        for r in rows[start + 1 :]
        if re.fullmatch(r"GPU\d+", r[0])
    }
    parent = {gpu: gpu for gpu in matrix}

    def root(gpu: int) -> int:
        while parent[gpu] != gpu:
            gpu = parent[gpu]
        return gpu

    linked = False
    for gpu, cells in matrix.items():
        for column, link in cells.items():
            peer = int(column[3:]) if re.fullmatch(r"GPU\d+", column) else None
            if peer in parent and _NVLINK.match(link):
                linked = True
                parent[root(peer)] = root(gpu)
    if linked:
        keys = {gpu: root(gpu) for gpu in matrix}
    else:
        numa = {gpu: cells.get("NUMA Affinity", "") for gpu, cells in matrix.items()}
        if not all(v.isdigit() for v in numa.values()):
            return {}
        keys = {gpu: int(v) for gpu, v in numa.items()}
    ids: dict[int, int] = {}
    return {gpu: ids.setdefault(key, len(ids)) for gpu, key in sorted(keys.items())}


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """Devices from the query CSV, with groups from the topology matrix."""
    query, topo = outputs
    groups = topology_groups(topo)
    return [replace(d, group=groups.get(d.index)) for d in parse_query(query, Vendor.NVIDIA)]


PROBE = Probe(
    tool="nvidia-smi",
    vendor=Vendor.NVIDIA,
    commands=(("nvidia-smi", *QUERY), ("nvidia-smi", "topo", "-m")),
    parse=parse,
)
