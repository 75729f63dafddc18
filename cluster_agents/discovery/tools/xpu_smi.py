"""xpu_smi (Kunlunxin XPU): the DEVICES table of plain `xpu_smi`.

Format recorded from xpu_smi 4.x/5.x on R200/R300/K200 nodes (columns DevID, PCI Addr, Model,
SN, INODE, State, UseRate, L3, Memory, ...); the P800 rows of
tests/unit/data/discovery/xpu_smi.txt follow it. State "N" is normal; any other state is
reported unhealthy. The serial number identifies a device.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import table_blocks
from federation.catalog.types import Vendor


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per row of the DEVICES table."""
    (text,) = outputs
    blocks = table_blocks(text)
    starts = [i for i, b in enumerate(blocks[:-1]) if b[0][0] == "DevID" and "Model" in b[0]]
    if not starts:
        return []
    header = blocks[starts[0]][0]
    devices = []
    for row in blocks[starts[0] + 1]:
        cells = dict(zip(header, row, strict=False))
        if not cells.get("DevID", "").isdigit():
            continue
        total = re.search(r"/\s*(\d+)\s*MB", cells.get("Memory", ""))
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.KUNLUNXIN,
                model=cells.get("Model", ""),
                index=int(cells["DevID"]),
                uuid=cells.get("SN", ""),
                memory_mib=int(total.group(1)) if total else 0,
                healthy=cells.get("State") == "N" and total is not None,
            )
        )
    return devices


PROBE = Probe(tool="xpu_smi", vendor=Vendor.KUNLUNXIN, commands=(("xpu_smi",),), parse=parse)
