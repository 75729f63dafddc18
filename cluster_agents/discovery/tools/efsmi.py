"""efsmi (Enflame GCU): the per-device query report `efsmi -q`.

Format recorded from efsmi 1.4 ("DEV ID N" blocks with indented sections "Device Info" and
"Device Mem Info"; older drivers say "Mem Size", newer "Total Size"); see
tests/unit/data/discovery/efsmi-q.txt. "Health : True" is healthy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import key_value_blocks, mib
from federation.catalog.types import Vendor

_DEV = re.compile(r"^DEV ID\s+(\d+)\s*$")


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per "DEV ID N" block."""
    (text,) = outputs
    devices = []
    for index, dev in sorted(key_value_blocks(text, _DEV).items()):
        total = dev.get("device mem info/total size") or dev.get("device mem info/mem size", "")
        memory = mib(total)
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.ENFLAME,
                model=dev.get("device info/dev name", ""),
                index=index,
                uuid=dev.get("device info/dev uuid", ""),
                memory_mib=memory or 0,
                healthy=dev.get("device info/health", "").lower() == "true" and memory is not None,
            )
        )
    return devices


PROBE = Probe(tool="efsmi", vendor=Vendor.ENFLAME, commands=(("efsmi", "-q"),), parse=parse)
