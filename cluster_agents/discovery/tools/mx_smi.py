"""mx-smi (MetaX): the GPU table of plain `mx-smi`.

Format recorded from mx-smi 2.1-2.2 (two lines per GPU: "GPU NAME | Bus-id | GPU-Util", then
"Temp Power | Memory-Usage | GPU-State"); see tests/unit/data/discovery/mx-smi.txt. State
"Available" (or no state column, older releases) is healthy, anything else is not. The table
has no UUID, so the bus id identifies a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import mib, table_blocks
from federation.catalog.types import Vendor


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per two-line GPU block."""
    (text,) = outputs
    devices = []
    for block in table_blocks(text):
        fields = block[0][0].split()
        if len(block) != 2 or len(block[0]) != 3 or not fields or not fields[0].isdigit():
            continue
        usage, state = block[1][1], block[1][2] if len(block[1]) > 2 else ""
        memory = mib(usage.rpartition("/")[2]) if "/" in usage else None
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.METAX,
                model=" ".join(fields[1:]),
                index=int(fields[0]),
                uuid=block[0][1],
                memory_mib=memory or 0,
                healthy=memory is not None and state in ("Available", ""),
            )
        )
    return devices


PROBE = Probe(tool="mx-smi", vendor=Vendor.METAX, commands=(("mx-smi",),), parse=parse)
