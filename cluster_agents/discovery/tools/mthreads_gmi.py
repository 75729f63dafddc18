"""mthreads-gmi (Moore Threads): the device table of plain `mthreads-gmi`.

Format recorded from mthreads-gmi 1.14-2.4 (three lines per GPU: "ID Name | PCIe | %GPU Mem",
then device type, lane width, temperature); see tests/unit/data/discovery/mthreads-gmi.txt.
Memory is the total in "used(total)". A GPU whose memory reads "N/A" is reported unhealthy.
The table has no UUID, so the PCI bus id identifies a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import mib, table_blocks
from federation.catalog.types import Vendor


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per three-line GPU block."""
    (text,) = outputs
    devices = []
    for block in table_blocks(text):
        head = block[0]
        fields = head[0].split()
        if len(head) != 3 or not fields or not fields[0].isdigit():
            continue  # header, version line, process rows (no '|')
        total = re.search(r"\(([^)]*)\)", head[2])
        memory = mib(total.group(1)) if total else None
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.MTHREADS,
                model=" ".join(fields[1:]),
                index=int(fields[0]),
                uuid=head[1],
                memory_mib=memory or 0,
                healthy=memory is not None,
            )
        )
    return devices


PROBE = Probe(
    tool="mthreads-gmi", vendor=Vendor.MTHREADS, commands=(("mthreads-gmi",),), parse=parse
)
